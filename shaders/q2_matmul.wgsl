// 2-bit ternary codes (Q2_0, Q2_0 g128, PQ2_0, PTQ1_0 repacked at load) ×
// activations already rounded to Q8_0 by the quantize kernel: weight
// (c − 1)·d, c the code, d the scale of its GROUP. Each u32 word holds 16
// codes (element e in bits 2e…2e+1). Tiling as f32_matmul: RPW rows × TT
// tokens per workgroup, threads striding over words, a tree reduction. The
// weight may be one chunk of rows starting at row ROW0.
// Constants: K, M, ROW0, GROUP, RPW, TT, WG, XROWS, ACC (=RPW·TT),
// RED (=WG·ACC).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> codes: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> dst: array<f32>;

var<workgroup> red: array<f32, RED>;

fn nibble(w: u32) -> vec4<f32> {
	return vec4<f32>(f32(w & 3u), f32((w >> 2u) & 3u), f32((w >> 4u) & 3u), f32((w >> 6u) & 3u)) - vec4<f32>(1.0);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * RPW;
	let tok0 = wid.y * TT;
	let n = min(batch.n, XROWS);
	let K4 = K / 4u;
	let WORDS = K / 16u;
	let GROUPS = K / GROUP;
	var acc: array<f32, ACC>;
	for (var i = 0u; i < RPW * TT; i++) {
		acc[i] = 0.0;
	}
	for (var c = lid; c < WORDS; c += WG) {
		var wr: array<u32, RPW>;
		var sc: array<f32, RPW>;
		for (var r = 0u; r < RPW; r++) {
			wr[r] = codes[(row0 + r) * WORDS + c];
			sc[r] = scales[(row0 + r) * GROUPS + c * 16u / GROUP];
		}
		for (var t = 0u; t < TT; t++) {
			let tok = tok0 + t;
			if (tok >= n) {
				break;
			}
			let xb = tok * K4 + c * 4u;
			let x0 = x[xb];
			let x1 = x[xb + 1u];
			let x2 = x[xb + 2u];
			let x3 = x[xb + 3u];
			for (var r = 0u; r < RPW; r++) {
				let w = wr[r];
				let s = dot(nibble(w), x0) + dot(nibble(w >> 8u), x1) + dot(nibble(w >> 16u), x2) + dot(nibble(w >> 24u), x3);
				acc[r * TT + t] += sc[r] * s;
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
