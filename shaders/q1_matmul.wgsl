// Q1_0 matrix × activations, weights repacked at load into u32 sign words
// (row-major, K/32 per row) and f32 block scales (K/128 per row).
// Each thread owns whole u32 words: one word is 32 weights and exactly one
// Q8_0 block of x, which the thread quantizes in registers as llama.cpp's
// x86 build does (d = amax/127 rounded to f16, q = round(x·127/amax)).
// With q integers, Σ sᵢqᵢ = 2·Σ_{bit=1} qᵢ − Σ qᵢ is exact in f32.
// A workgroup computes RPW rows for TT tokens, so every x block it
// quantizes is reused RPW times and every weight word TT times.
// Up to three matrices stored back to back (q/k/v, gate/up: a group of
// the decode matvecs, fuse.go) run as one dispatch with flag GROUP: rows
// below M0 go to dst0, below M1 to dst1, the rest to dst2; with ADD (one
// output) the result is also added to resid, as the decode matvecs do.
// Constants: K, M (all the rows), WORDS (=K/32), RPW, TT, WG, XROWS (rows
// of x), ACC (=RPW·TT) and RED (=WG·ACC); with GROUP, M0 and M1; naga 0.19
// wants array sizes as plain names.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> bits: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> dst: array<f32>;
//#if OUT2
@group(0) @binding(5) var<storage, read_write> dst1: array<f32>;
//#endif
//#if OUT3
@group(0) @binding(6) var<storage, read_write> dst2: array<f32>;
//#endif
//#if ADD
@group(0) @binding(7) var<storage, read_write> resid: array<f32>;
//#endif

// store writes row of token tok's output.
fn store(tok: u32, row: u32, v: f32) {
//#if GROUP
	if (row < M0) {
		dst[tok * M0 + row] = v;
//#if ADD
		resid[tok * M0 + row] = resid[tok * M0 + row] + v;
//#endif
		return;
	}
//#if OUT2
	if (row < M1) {
		dst1[tok * (M1 - M0) + row - M0] = v;
		return;
	}
//#endif
//#if OUT3
	dst2[tok * (M - M1) + row - M1] = v;
//#endif
//#else
	dst[tok * M + row] = v;
//#endif
}

//#include q1_layout
//#include cpu_math

var<workgroup> red: array<f32, RED>;

fn masked(b: u32, q0: vec4<f32>, q1: vec4<f32>, q2: vec4<f32>, q3: vec4<f32>,
          q4: vec4<f32>, q5: vec4<f32>, q6: vec4<f32>, q7: vec4<f32>) -> f32 {
	let sh = vec4<u32>(0u, 1u, 2u, 3u);
	let one = vec4<u32>(1u);
	let z = vec4<f32>(0.0);
	var m = select(z, q0, ((vec4<u32>(b) >> sh) & one) != vec4<u32>(0u));
	m += select(z, q1, ((vec4<u32>(b >> 4u) >> sh) & one) != vec4<u32>(0u));
	m += select(z, q2, ((vec4<u32>(b >> 8u) >> sh) & one) != vec4<u32>(0u));
	m += select(z, q3, ((vec4<u32>(b >> 12u) >> sh) & one) != vec4<u32>(0u));
	m += select(z, q4, ((vec4<u32>(b >> 16u) >> sh) & one) != vec4<u32>(0u));
	m += select(z, q5, ((vec4<u32>(b >> 20u) >> sh) & one) != vec4<u32>(0u));
	m += select(z, q6, ((vec4<u32>(b >> 24u) >> sh) & one) != vec4<u32>(0u));
	m += select(z, q7, ((vec4<u32>(b >> 28u) >> sh) & one) != vec4<u32>(0u));
	return dot(m, vec4<f32>(1.0));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * RPW;
	let tok0 = wid.y * TT;
	let n = min(batch.n, XROWS);
	var acc: array<f32, ACC>;
	for (var i = 0u; i < RPW * TT; i++) {
		acc[i] = 0.0;
	}
	for (var w = lid; w < WORDS; w += WG) {
		var b: array<u32, RPW>;
		var d: array<f32, RPW>;
		for (var r = 0u; r < RPW; r++) {
			b[r] = bits[q1_word(row0 + r, w)];
			d[r] = scales[q1_scale(row0 + r, w / 4u)];
		}
		for (var t = 0u; t < TT; t++) {
			let tok = tok0 + t;
			if (tok >= n) {
				break;
			}
			let base = (tok * K + w * 32u) / 4u;
			var x0 = x[base];
			var x1 = x[base + 1u];
			var x2 = x[base + 2u];
			var x3 = x[base + 3u];
			var x4 = x[base + 4u];
			var x5 = x[base + 5u];
			var x6 = x[base + 6u];
			var x7 = x[base + 7u];
			let a = max(max(max(abs(x0), abs(x1)), max(abs(x2), abs(x3))), max(max(abs(x4), abs(x5)), max(abs(x6), abs(x7))));
			let amax = max(max(a.x, a.y), max(a.z, a.w));
			let dx = f16_round(div_rn(amax, 127.0));
			let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
			x0 = round(x0 * id);
			x1 = round(x1 * id);
			x2 = round(x2 * id);
			x3 = round(x3 * id);
			x4 = round(x4 * id);
			x5 = round(x5 * id);
			x6 = round(x6 * id);
			x7 = round(x7 * id);
			let sum = dot(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7, vec4<f32>(1.0));
			for (var r = 0u; r < RPW; r++) {
				let ms = masked(b[r], x0, x1, x2, x3, x4, x5, x6, x7);
				acc[r * TT + t] += d[r] * (dx * (2.0 * ms - sum));
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
			store(tok0 + t, row0 + r, red[lid * WG]);
		}
	}
}
