// Block-quantized weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K as stored in the
// file; qblock.wgsli) × activations already rounded to the type's vec-dot
// type by the quantize kernel: the matvec of a decode step and the
// fallback of a prompt pass. Tiling as f32_matmul: RPW rows × TT tokens per
// workgroup, threads striding over units of 32 values, each unit
// dequantized in registers once per row and used for every token, a tree
// reduction. The weight may be one chunk of rows starting at row ROW0.
// Constants: K, M, ROW0, BLOCKS (=K/values a block), DOFF, RPW, TT, WG,
// XROWS, ACC (=RPW·TT), RED (=WG·ACC); one type flag; DECODE for one
// token (TT 1), whose x values are loaded once for all RPW rows.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> wq: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

var<workgroup> red: array<f32, RED>;

//#include qblock
//#if Q8_0
//#include q8_0
//#endif
//#if Q4_0
//#include q4_0
//#endif
//#if Q4_K
//#include q4k
//#endif
//#if Q5_K
//#include q5k
//#endif
//#if Q6_K
//#include q6k
//#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * RPW;
	let tok0 = wid.y * TT;
	let n = min(batch.n, XROWS);
	let K4 = K / 4u;
	let UNITS = K / 32u;
	var acc: array<f32, ACC>;
	for (var i = 0u; i < RPW * TT; i++) {
		acc[i] = 0.0;
	}
	for (var u = lid; u < UNITS; u += WG) {
//#if DECODE
		// one token: its 32 values loaded once for every row
		var xv: array<vec4<f32>, 8>;
		for (var k = 0u; k < 8u; k++) {
			xv[k] = x[u * 8u + k];
		}
		for (var r = 0u; r < RPW; r++) {
			let blk = (row0 + r) * BLOCKS + u / UPB;
			let j = u % UPB;
			var s = 0.0;
			for (var k = 0u; k < 8u; k++) {
				s += dot(dq(blk, j, k), xv[k]);
			}
			acc[r] += s;
		}
//#else
		for (var r = 0u; r < RPW; r++) {
			let blk = (row0 + r) * BLOCKS + u / UPB;
			let j = u % UPB;
			var w: array<vec4<f32>, 8>;
			for (var k = 0u; k < 8u; k++) {
				w[k] = dq(blk, j, k);
			}
			for (var t = 0u; t < TT; t++) {
				let tok = tok0 + t;
				if (tok >= n) {
					break;
				}
				let xb = tok * K4 + u * 8u;
				var s = 0.0;
				for (var k = 0u; k < 8u; k++) {
					s += dot(w[k], x[xb + k]);
				}
				acc[r * TT + t] += s;
			}
		}
//#endif
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
