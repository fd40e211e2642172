// Block-quantized weights (qblock.wgsli) × many activation rows (a prompt
// pass), a register-blocked SGEMM as q1_gemm2: a workgroup of 256 (16 × 16
// threads) computes a 64-row × 64-token tile, each thread 4 rows × 4 tokens
// in vec4 accumulators. Per K slice of 32 (one unit of every row) each
// thread dequantizes 8 values of one row into workgroup memory and stages
// 8 activations of one token (already rounded to the type's vec-dot type),
// both transposed, [k][row] and [k][token]: 16 KiB, the least any WebGPU
// device grants; the next slice is loaded and dequantized into registers
// while the current one is multiplied. Rows past the chunk's and tokens past n are computed from
// clamped or zero loads and never stored. The weight may be one chunk of
// ROWS rows starting at row ROW0.
// Constants: K, M, ROW0, ROWS, BLOCKS, DOFF, XROWS; one type flag.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> wq: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

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

var<workgroup> As: array<vec4<f32>, 512>; // [k][row / 4], 32 × 64
var<workgroup> Bs: array<vec4<f32>, 512>; // [k][token / 4], 32 × 64

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * 64u;
	let tok0 = wid.y * 64u;
	let n = min(batch.n, XROWS);
	let tx = lid % 16u;
	let ty = lid / 16u;
	// the loaders: one row (token) and two of the slice's eight vec4s
	let lr = lid % 64u;
	let lk = (lid / 64u) * 2u;
	let arow = min(row0 + lr, ROWS - 1u);
	let btok = tok0 + lr;
	let live = btok < n;
	let xrow = min(btok, XROWS - 1u) * (K / 4u) + lk;
	var c0 = vec4<f32>(0.0);
	var c1 = vec4<f32>(0.0);
	var c2 = vec4<f32>(0.0);
	var c3 = vec4<f32>(0.0);
	var w0 = dq(arow * BLOCKS, 0u, lk);
	var w1 = dq(arow * BLOCKS, 0u, lk + 1u);
	var x0 = vec4<f32>(0.0);
	var x1 = vec4<f32>(0.0);
	if (live) {
		x0 = x[xrow];
		x1 = x[xrow + 1u];
	}
	for (var u = 0u; u < K / 32u; u++) {
		let kb = lk * 4u;
		let a = lr / 4u;
		let e = lr % 4u;
		As[(kb + 0u) * 16u + a][e] = w0.x;
		As[(kb + 1u) * 16u + a][e] = w0.y;
		As[(kb + 2u) * 16u + a][e] = w0.z;
		As[(kb + 3u) * 16u + a][e] = w0.w;
		As[(kb + 4u) * 16u + a][e] = w1.x;
		As[(kb + 5u) * 16u + a][e] = w1.y;
		As[(kb + 6u) * 16u + a][e] = w1.z;
		As[(kb + 7u) * 16u + a][e] = w1.w;
		Bs[(kb + 0u) * 16u + a][e] = x0.x;
		Bs[(kb + 1u) * 16u + a][e] = x0.y;
		Bs[(kb + 2u) * 16u + a][e] = x0.z;
		Bs[(kb + 3u) * 16u + a][e] = x0.w;
		Bs[(kb + 4u) * 16u + a][e] = x1.x;
		Bs[(kb + 5u) * 16u + a][e] = x1.y;
		Bs[(kb + 6u) * 16u + a][e] = x1.z;
		Bs[(kb + 7u) * 16u + a][e] = x1.w;
		workgroupBarrier();
		let v = u + 1u;
		if (v < K / 32u) {
			let blk = arow * BLOCKS + v / UPB;
			w0 = dq(blk, v % UPB, lk);
			w1 = dq(blk, v % UPB, lk + 1u);
			if (live) {
				x0 = x[xrow + v * 8u];
				x1 = x[xrow + v * 8u + 1u];
			}
		}
		for (var k = 0u; k < 32u; k++) {
			let av = As[k * 16u + ty];
			let bv = Bs[k * 16u + tx];
			c0 += av * bv.x;
			c1 += av * bv.y;
			c2 += av * bv.z;
			c3 += av * bv.w;
		}
		workgroupBarrier();
	}
	let r = row0 + 4u * ty;
	let t = tok0 + 4u * tx;
	var c = array<vec4<f32>, 4>(c0, c1, c2, c3);
	for (var i = 0u; i < 4u; i++) {
		if (t + i >= n) {
			break;
		}
		for (var e = 0u; e < 4u; e++) {
			if (r + e < ROWS) {
				dst[(t + i) * M + ROW0 + r + e] = c[i][e];
			}
		}
	}
}
