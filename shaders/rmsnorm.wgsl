// RMSNorm over groups of G values of each row (G = row length for the
// token norm, head_dim for Qwen3's per-head Q/K norm), as ggml_rms_norm:
// mean of squares in f32, scale = 1/sqrt(mean + eps), then × weight.
// One workgroup per (group, row). Constants: COLS, G, EPS, WG, XROWS;
// flag INPLACE (dst is x: one read_write binding).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> w: array<f32>;
//#if INPLACE
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
//#else
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;
//#endif

var<workgroup> red: array<f32, WG>;

fn load(i: u32) -> f32 {
//#if INPLACE
	return dst[i];
//#else
	return x[i];
//#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row = wid.y;
	if (row >= min(batch.n, XROWS)) {
		return;
	}
	let base = row * COLS + wid.x * G;
	var ss = 0.0;
	for (var j = lid; j < G; j += WG) {
		let v = load(base + j);
		ss += v * v;
	}
	red[lid] = ss;
	workgroupBarrier();
	for (var s = WG / 2u; s > 0u; s >>= 1u) {
		if (lid < s) {
			red[lid] += red[lid + s];
		}
		workgroupBarrier();
	}
	let scale = 1.0 / sqrt(red[0] / f32(G) + EPS);
	for (var j = lid; j < G; j += WG) {
		dst[base + j] = load(base + j) * scale * w[j];
	}
}
