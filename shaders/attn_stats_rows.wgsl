// Prompt-pass attention, pass 1 of 3 (the decode passes are attn_stats and
// attn_qk, attn_blk.wgsli). Workgroup (kv head g, row,
// split c) serves the QPG query heads sharing g, so each K row is read once
// for all of them. It scores positions [c·chunk, min((c+1)·chunk, pos+row+1)),
// or its share of the window's (split_span),
// in tiles of TILE (thread hq·TILE + j scores head hq at tile position j)
// and writes each head's running max and Σexp for the split.
// The numerics follow llama.cpp's CPU graph (and infer/cpu): q rounded to
// f16, K from the f16 cache, s = scale·Σ q·k in f32.
// Constants: HEADS, KVHEADS, QPG (=HEADS/KVHEADS), D, KVD, QROWS, LAYER_OFF,
// SCALE, WIN, TILE (=WG/QPG, a power of two), WG.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
@group(0) @binding(3) var<storage, read_write> stats: array<vec2<f32>>;

//#include cpu_math
//#if KVQ
//#include kv_q8
//#endif
//#include attn_tile
//#include rows

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let g = wid.x;
	let row = wid.y;
	let c = wid.z;
	if (row >= min(batch.n, QROWS) || c >= batch.splits) {
		return;
	}
	let seq = row_pos(row) + 1u;
	kv0 = row_base(row);
	let span = split_span(seq, c);
	let t0 = span.x;
	let t1 = span.y;
	load_q(lid, row, g);
	let ml = tile_stats(lid, g, t0, t1);
	if (lid % TILE == 0u && lid / TILE < QPG) {
		stats[(row * HEADS + g * QPG + lid / TILE) * batch.splits + c] = ml;
	}
}
