// Q1_0 matrix × many activation rows (prefill), as a tiled SGEMM: a
// workgroup of 256 computes a 64-row × 64-token tile, each thread a 4 × 4
// block. Per K slice of 32 (one sign word per row, one Q8_0 block of x)
// the signs are expanded to ±d into workgroup memory and the activations,
// already rounded by the quantize kernel to llama.cpp's Q8_0 values
// (q·d_x), are staged next to them; weights are read once per 64 tokens.
// Each product ±d_w·q·d_x is the CPU's integer dot up to f32 rounding.
// Constants: K, M, WORDS (=K/32), XROWS.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> bits: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> xq: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> dst: array<vec4<f32>>;

//#include q1_layout

var<workgroup> As: array<f32, 2048>; // [k][row], 32 × 64
var<workgroup> Bs: array<f32, 2048>; // [k][token], 32 × 64

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * 64u;
	let tok0 = wid.y * 64u;
	let n = min(batch.n, XROWS);
	let tx = lid % 16u;
	let ty = lid / 16u;
	// loaders
	let ar = lid % 64u;
	let ak = (lid / 64u) * 8u;
	let bt = lid / 4u;
	let bk = (lid % 4u) * 8u;
	var c0 = vec4<f32>(0.0);
	var c1 = vec4<f32>(0.0);
	var c2 = vec4<f32>(0.0);
	var c3 = vec4<f32>(0.0);
	for (var w = 0u; w < WORDS; w++) {
		let word = bits[q1_word(row0 + ar, w)];
		let d = scales[q1_scale(row0 + ar, w / 4u)];
		for (var i = 0u; i < 8u; i++) {
			As[(ak + i) * 64u + ar] = select(-d, d, ((word >> (ak + i)) & 1u) != 0u);
		}
		var v0 = vec4<f32>(0.0);
		var v1 = vec4<f32>(0.0);
		if (tok0 + bt < n) {
			let base = ((tok0 + bt) * K + w * 32u + bk) / 4u;
			v0 = xq[base];
			v1 = xq[base + 1u];
		}
		Bs[(bk + 0u) * 64u + bt] = v0.x;
		Bs[(bk + 1u) * 64u + bt] = v0.y;
		Bs[(bk + 2u) * 64u + bt] = v0.z;
		Bs[(bk + 3u) * 64u + bt] = v0.w;
		Bs[(bk + 4u) * 64u + bt] = v1.x;
		Bs[(bk + 5u) * 64u + bt] = v1.y;
		Bs[(bk + 6u) * 64u + bt] = v1.z;
		Bs[(bk + 7u) * 64u + bt] = v1.w;
		workgroupBarrier();
		for (var k = 0u; k < 32u; k++) {
			let a = vec4<f32>(As[k * 64u + tx * 4u], As[k * 64u + tx * 4u + 1u], As[k * 64u + tx * 4u + 2u], As[k * 64u + tx * 4u + 3u]);
			let bb = k * 64u + ty * 4u;
			c0 += a * Bs[bb];
			c1 += a * Bs[bb + 1u];
			c2 += a * Bs[bb + 2u];
			c3 += a * Bs[bb + 3u];
		}
		workgroupBarrier();
	}
	let t = tok0 + ty * 4u;
	let o = (row0 + tx * 4u) / 4u;
	if (t < n) {
		dst[(t * M) / 4u + o] = c0;
	}
	if (t + 1u < n) {
		dst[((t + 1u) * M) / 4u + o] = c1;
	}
	if (t + 2u < n) {
		dst[((t + 2u) * M) / 4u + o] = c2;
	}
	if (t + 3u < n) {
		dst[((t + 3u) * M) / 4u + o] = c3;
	}
}
