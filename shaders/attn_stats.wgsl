// Attention, pass 1 of 3 (split-KV, GQA-aware). Workgroup (kv head g, rows
// RT·y … +RT−1, split c) serves the QPG query heads sharing g of each row,
// so each K row is read once for all of them. It scores positions
// [c·chunk, min((c+1)·chunk, pos+row+1)), or its share of the window's
// (split_span, attn_blk), and writes each head's max and Σexp for the
// split.
// Constants: HEADS, KVHEADS, QPG (=HEADS/KVHEADS), D, KVD, QROWS, LAYER_OFF,
// SCALE, WIN, WG, RT, RDN.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
@group(0) @binding(3) var<storage, read_write> stats: array<vec2<f32>>;

//#include cpu_math
//#if KVQ
//#include kv_q8
//#endif
//#include attn_blk

fn kword4(t: u32, g: u32, i: u32) -> vec4<u32> {
	let o = LAYER_OFF + t * (KVD / 2u) + g * (D / 2u) + 4u * i;
	return vec4<u32>(kc[o], kc[o + 1u], kc[o + 2u], kc[o + 3u]);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let g = wid.x;
	let row0 = wid.y * RT;
	let c = wid.z;
	let rows = min(batch.n, QROWS);
	if (row0 >= rows || c >= batch.splits) {
		return;
	}
	let seq = batch.pos + row0 + 1u;
	let span = split_span(seq, c);
	let t0 = span.x;
	let t1 = span.y;
	load_q(lid, row0, rows, g);
	blk_stats(lid, g, t0, t1, t1 + min(RT, rows - row0) - 1u);
	let row = row0 + lid / QPG;
	if (lid < NH && row < rows) {
		stats[(row * HEADS + g * QPG + lid % QPG) * batch.splits + c] = ml[lid];
	}
}
