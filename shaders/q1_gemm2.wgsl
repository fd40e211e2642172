// Q1_0 matrix × many activation rows (prefill), a register-blocked SGEMM:
// a workgroup of 256 (16 × 16 threads) computes a BM-row × BN-token tile,
// BM = 64·RM and BN = 64·RN, each thread 4·RM rows × 4·RN tokens held in
// vec4 accumulators (its rows and tokens in groups of four, 64 apart, so
// that the sixteen threads of a row read neighbouring vec4s of workgroup
// memory). Per K slice of 32 (one sign word per row, one Q8_0 block of x)
// the signs are expanded once to ±d and the activations (already rounded
// to llama.cpp's Q8_0 values q·d_x) are staged transposed, [k][row] and
// [k][token]; the next slice's words, scales and activations are loaded
// into registers while the current one is multiplied, so global latency
// hides behind the FMAs. Each product ±d_w·q·d_x is the CPU's integer dot
// up to f32 rounding. Rows past M and tokens past n are computed from
// clamped or zero loads and never stored.
// Constants: K, M, WORDS (=K/32), XROWS, BM, BN, ASIZE (=8·BM), BSIZE (=8·BN), AK (=32·BM/256, the k
// values one thread expands), XV (=BN/32, the vec4s of x it loads); flag
// RM2 for 128-row tiles (BN is 64).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> bits: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> xq: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> dst: array<vec4<f32>>;

//#include q1_layout

var<workgroup> As: array<vec4<f32>, ASIZE>; // [k][row / 4], 32 × BM
var<workgroup> Bs: array<vec4<f32>, BSIZE>; // [k][token / 4], 32 × BN

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * BM;
	let tok0 = wid.y * BN;
	let n = min(batch.n, XROWS);
	let tx = lid % 16u;
	let ty = lid / 16u;
	// the weight loader: one row, AK of the slice's 32 k values
	let ar = lid % BM;
	let ak = (lid / BM) * AK;
	let arow = min(row0 + ar, M - 1u);
	// the activation loader: one token, XV of the slice's 8 vec4s
	let bt = lid % BN;
	let bk = (lid / BN) * XV;
	let btok = tok0 + bt;
	let live = btok < n;
	let xrow = min(btok, XROWS - 1u) * (K / 4u) + bk;

	var word = bits[q1_word(arow, 0u)];
	var d = scales[q1_scale(arow, 0u)];
	var x0 = vec4<f32>(0.0);
	var x1 = vec4<f32>(0.0);
	if (live) {
		x0 = xq[xrow];
		x1 = xq[xrow + 1u];
	}
	var c00 = vec4<f32>(0.0);
	var c01 = vec4<f32>(0.0);
	var c02 = vec4<f32>(0.0);
	var c03 = vec4<f32>(0.0);
//#if RM2
	var c10 = vec4<f32>(0.0);
	var c11 = vec4<f32>(0.0);
	var c12 = vec4<f32>(0.0);
	var c13 = vec4<f32>(0.0);
//#endif
	for (var w = 0u; w < WORDS; w++) {
		for (var i = 0u; i < AK; i++) {
			As[(ak + i) * (BM / 4u) + ar / 4u][ar % 4u] = select(-d, d, ((word >> (ak + i)) & 1u) != 0u);
		}
		let kb = bk * 4u;
		Bs[(kb + 0u) * (BN / 4u) + bt / 4u][bt % 4u] = x0.x;
		Bs[(kb + 1u) * (BN / 4u) + bt / 4u][bt % 4u] = x0.y;
		Bs[(kb + 2u) * (BN / 4u) + bt / 4u][bt % 4u] = x0.z;
		Bs[(kb + 3u) * (BN / 4u) + bt / 4u][bt % 4u] = x0.w;
		Bs[(kb + 4u) * (BN / 4u) + bt / 4u][bt % 4u] = x1.x;
		Bs[(kb + 5u) * (BN / 4u) + bt / 4u][bt % 4u] = x1.y;
		Bs[(kb + 6u) * (BN / 4u) + bt / 4u][bt % 4u] = x1.z;
		Bs[(kb + 7u) * (BN / 4u) + bt / 4u][bt % 4u] = x1.w;
		workgroupBarrier();
		if (w + 1u < WORDS) {
			word = bits[q1_word(arow, w + 1u)];
			d = scales[q1_scale(arow, (w + 1u) / 4u)];
			if (live) {
				let xb = xrow + (w + 1u) * 8u;
				x0 = xq[xb];
				x1 = xq[xb + 1u];
			}
		}
		for (var k = 0u; k < 32u; k++) {
			let a0 = As[k * (BM / 4u) + tx];
			let b0 = Bs[k * (BN / 4u) + ty];
			c00 += a0 * b0.x;
			c01 += a0 * b0.y;
			c02 += a0 * b0.z;
			c03 += a0 * b0.w;
//#if RM2
			let a1 = As[k * (BM / 4u) + 16u + tx];
			c10 += a1 * b0.x;
			c11 += a1 * b0.y;
			c12 += a1 * b0.z;
			c13 += a1 * b0.w;
//#endif
		}
		workgroupBarrier();
	}
	let t = tok0 + ty * 4u;
	let o = row0 / 4u + tx;
	store(t, o, c00, c01, c02, c03, n);
//#if RM2
	store(t, o + 16u, c10, c11, c12, c13, n);
//#endif
}

// store writes four tokens' outputs for the four rows of vec4 o.
fn store(t: u32, o: u32, c0: vec4<f32>, c1: vec4<f32>, c2: vec4<f32>, c3: vec4<f32>, n: u32) {
	if (o >= M / 4u) {
		return;
	}
	if (t < n) {
		dst[t * (M / 4u) + o] = c0;
	}
	if (t + 1u < n) {
		dst[(t + 1u) * (M / 4u) + o] = c1;
	}
	if (t + 2u < n) {
		dst[(t + 2u) * (M / 4u) + o] = c2;
	}
	if (t + 3u < n) {
		dst[(t + 3u) * (M / 4u) + o] = c3;
	}
}
