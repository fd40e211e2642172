// Qwen3's attention prologue in one dispatch: per-head RMSNorm and NEOX
// RoPE of q and of k, in place (as norm_rope.wgsl), and the store of the
// rotated k and of v into the layer's f16 cache (as store_kv.wgsl). The
// forward pass's RMSNorm(q), RMSNorm(k), Rope(q), Rope(k), StoreKV: three
// dispatches (two norm_rope, one store_kv) become one.
// Workgroup (head, row): heads below QHEADS are q's, the rest k's, whose
// workgroup also stores its head of k and v. Same arithmetic and summation
// order as the separate kernels.
// Constants: QCOLS, KVD, HEAD_DIM, DIMS, QEPS, KEPS, WG, XROWS, CTX,
// QHEADS, LAYER_OFF (u32 words); with KVQ (a Q8_0 K or V) store_q8's
// constants and flags.
//#include cpu_math
//#if KVQ
//#include kv_q8
//#include store_q8
//#endif
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> qw: array<f32>;
@group(0) @binding(2) var<storage, read> kw: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> q: array<f32>;
@group(0) @binding(5) var<storage, read_write> k: array<f32>;
@group(0) @binding(6) var<storage, read> v: array<vec2<f32>>;
@group(0) @binding(7) var<storage, read_write> kc: array<u32>;
@group(0) @binding(8) var<storage, read_write> vc: array<u32>;
//#include rows

var<workgroup> red: array<f32, WG>;
var<workgroup> head: array<f32, HEAD_DIM>;

fn load(isq: bool, i: u32) -> f32 {
	if (isq) {
		return q[i];
	}
	return k[i];
}

fn put(isq: bool, i: u32, val: f32) {
	if (isq) {
		q[i] = val;
	} else {
		k[i] = val;
	}
	head[i % HEAD_DIM] = val;
}

fn weight(isq: bool, j: u32) -> f32 {
	if (isq) {
		return qw[j];
	}
	return kw[j];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row = wid.y;
	if (row >= min(batch.n, XROWS)) {
		return;
	}
	let isq = wid.x < QHEADS;
	var base = row * QCOLS + wid.x * HEAD_DIM;
	var eps = QEPS;
	if (!isq) {
		base = row * KVD + (wid.x - QHEADS) * HEAD_DIM;
		eps = KEPS;
	}
	var ss = 0.0;
	for (var j = lid; j < HEAD_DIM; j += WG) {
		let val = load(isq, base + j);
		ss += val * val;
	}
	red[lid] = ss;
	workgroupBarrier();
	for (var s = WG / 2u; s > 0u; s >>= 1u) {
		if (lid < s) {
			red[lid] += red[lid + s];
		}
		workgroupBarrier();
	}
	let scale = 1.0 / sqrt(red[0] / f32(HEAD_DIM) + eps);
	let pos = row_pos(row);
	let at = row_base(row) + pos; // its cache position
	let half = DIMS / 2u;
	for (var j = lid; j < half; j += WG) {
		let a = load(isq, base + j) * scale * weight(isq, j);
		let b = load(isq, base + j + half) * scale * weight(isq, j + half);
		if (pos < CTX) {
			let cs = table[pos * half + j];
			put(isq, base + j, a * cs.x - b * cs.y);
			put(isq, base + j + half, a * cs.y + b * cs.x);
		} else {
			put(isq, base + j, a);
			put(isq, base + j + half, b);
		}
	}
	for (var j = DIMS + lid; j < HEAD_DIM; j += WG) {
		put(isq, base + j, load(isq, base + j) * scale * weight(isq, j));
	}
	workgroupBarrier();
	if (isq || at >= CTX) {
		return;
	}
//#if KVQ
	let g = wid.x - QHEADS;
	for (var j = lid; j < D; j += WG) {
		kh[j] = head[j] * KRS;
		vh[j] = v[(row * KVD + g * D + j) / 2u][j % 2u] * VRS;
	}
	store_heads(lid, at, g);
//#else
	let kh = wid.x - QHEADS;
	for (var p = lid; p < HEAD_DIM / 2u; p += WG) {
		let o = LAYER_OFF + at * (KVD / 2u) + kh * (HEAD_DIM / 2u) + p;
		kc[o] = f16_pack(vec2<f32>(head[2u * p], head[2u * p + 1u]));
		vc[o] = f16_pack(v[row * (KVD / 2u) + kh * (HEAD_DIM / 2u) + p]);
	}
//#endif
}
