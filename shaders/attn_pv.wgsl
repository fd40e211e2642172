// Attention, pass 2 of 3. Same workgroups as attn_stats. From all splits'
// (max, Σexp) it forms each head's softmax max M and sum L (blk_combine),
// rescores its positions, rounds the weights p = exp(s − M)/L to f16 as
// llama.cpp's CPU graph does before they meet V, and writes Σ p·V of its
// split (attn_blk_pv). Rows RT at a time, as attn_stats.
// With SCORED (decode after attn_qk) the scaled scores are read from sc
// (SCTX per head) instead of recomputed from q and K.
// Constants: as attn_stats.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
//#if VQ8
@group(0) @binding(3) var<storage, read> vc: array<u32>;
//#else
@group(0) @binding(3) var<storage, read> vc: array<vec2<u32>>;
//#endif
@group(0) @binding(4) var<storage, read> stats: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> part: array<vec4<f32>>;
//#if SCORED
@group(0) @binding(6) var<storage, read> sc: array<f32>;
//#endif

//#include cpu_math
//#if KVQ
//#include kv_q8
//#endif
//#include attn_blk
//#include attn_blk_pv

// the workgroup's first row, rows, kv head and split, for put_out
var<private> prow: u32;
var<private> prows: u32;
var<private> pg: u32;
var<private> psplit: u32;

fn kword4(t: u32, g: u32, i: u32) -> vec4<u32> {
	let o = LAYER_OFF + t * (KVD / 2u) + g * (D / 2u) + 4u * i;
	return vec4<u32>(kc[o], kc[o + 1u], kc[o + 2u], kc[o + 3u]);
}

fn vword(t: u32, g: u32, d4: u32) -> vec4<f32> {
//#if VQ8
	return i8x4(vc[q8_qi(t, g, d4)]) * q8_scale(vc[q8_si(t, g, d4 / 8u)], d4 / 8u);
//#else
	let w = vc[(LAYER_OFF + t * (KVD / 2u) + g * (D / 2u)) / 2u + d4];
	return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
//#endif
}

fn put_out(h: u32, d4: u32, o: vec4<f32>) {
	let row = prow + h / QPG;
	if (row < prows) {
		part[((row * HEADS + pg * QPG + h % QPG) * batch.splits + psplit) * D4 + d4] = o;
	}
}

// blk_combine leaves in ml[h] head h's softmax max M and 1/L over n ≤ BLK
// splits, whose (max, Σexp) are stats[(row·HEADS + g·QPG + h)·n + c] (row
// prow + h/QPG, below prows).
fn blk_combine(lid: u32, n: u32) {
	var st: array<vec2<f32>, NH>;
	for (var h = 0u; h < NH; h++) {
		st[h] = vec2<f32>(NEG, 0.0);
		let row = prow + h / QPG;
		if (lid < n && row < prows) {
			st[h] = stats[(row * HEADS + pg * QPG + h % QPG) * n + lid];
		}
		rd[h * BLK + lid] = st[h].x;
	}
	tree(lid, true);
	var mx: array<f32, NH>;
	for (var h = 0u; h < NH; h++) {
		mx[h] = rd[h * BLK];
	}
	workgroupBarrier();
	for (var h = 0u; h < NH; h++) {
		rd[h * BLK + lid] = select(0.0, st[h].y * ggml_exp(st[h].x - mx[h]), lid < n);
	}
	tree(lid, false);
	if (lid == 0u) {
		for (var h = 0u; h < NH; h++) {
			ml[h] = vec2<f32>(mx[h], 1.0 / rd[h * BLK]);
		}
	}
	workgroupBarrier();
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
	prow = row0;
	prows = rows;
	pg = g;
	psplit = c;
	let seq = batch.pos + row0 + 1u;
	let span = split_span(seq, c);
	let t0 = span.x;
	let t1 = span.y;
//#if SCORED
//#else
	load_q(lid, row0, rows, g);
//#endif
	blk_combine(lid, batch.splits);
	blk_pv(lid, g, t0, t1, t1 + min(RT, rows - row0) - 1u);
}
