// L2 normalisation of each group of G values of each row, as llama.cpp's
// build_gdn_l2_norm: ggml_rms_norm with eps/G (mean of squares in f32,
// scale = 1/sqrt(mean + EPS), EPS already divided by G), then × 1/√G
// (INVSQRTG). One workgroup per (group, row). Constants: COLS, G, EPS,
// INVSQRTG, WG, XROWS; flag INPLACE (dst is x).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
//#if INPLACE
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
fn load(i: u32) -> f32 { return dst[i]; }
//#else
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
fn load(i: u32) -> f32 { return x[i]; }
//#endif

var<workgroup> red: array<f32, WG>;

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
		dst[base + j] = load(base + j) * scale * INVSQRTG;
	}
}
