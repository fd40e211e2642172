// Dense f32 weights (types without a native kernel are dequantized to f32
// at load) × activations already rounded to the weight's vec-dot type by
// the quantize kernel. Layout and tiling as q1_matmul: RPW rows × TT tokens
// per workgroup, threads striding over vec4 columns, tree reduction.
// The weight may be one chunk of rows starting at row ROW0.
// Constants: K, M, ROW0, RPW, TT, WG, XROWS, ACC (=RPW·TT), RED (=WG·ACC).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

var<workgroup> red: array<f32, RED>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * RPW;
	let tok0 = wid.y * TT;
	let n = min(batch.n, XROWS);
	let K4 = K / 4u;
	var acc: array<f32, ACC>;
	for (var i = 0u; i < RPW * TT; i++) {
		acc[i] = 0.0;
	}
	for (var c = lid; c < K4; c += WG) {
		var wr: array<vec4<f32>, RPW>;
		for (var r = 0u; r < RPW; r++) {
			wr[r] = w[(row0 + r) * K4 + c];
		}
		for (var t = 0u; t < TT; t++) {
			let tok = tok0 + t;
			if (tok >= n) {
				break;
			}
			let xv = x[tok * K4 + c];
			for (var r = 0u; r < RPW; r++) {
				acc[r * TT + t] += dot(wr[r], xv);
			}
		}
	}
	for (var i = 0u; i < RPW * TT; i++) {
		red[i * WG + lid] = acc[i];
	}
	workgroupBarrier();
	for (var s = WG / 2u; s > 0u; s >>= 1u) {
		if (lid < s) {
			for (var i = 0u; i < RPW * TT; i++) {
				red[i * WG + lid] += red[i * WG + lid + s];
			}
		}
		workgroupBarrier();
	}
	if (lid < RPW * TT) {
		let r = lid / TT;
		let t = lid % TT;
		if (tok0 + t < n) {
			dst[(tok0 + t) * M + ROW0 + row0 + r] = red[lid * WG];
		}
	}
}
