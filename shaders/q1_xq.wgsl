// Q1_0 matrix × one activation row (decode) whose Q8_0 rounding its
// producer already wrote (rmsnorm.wgsl with Q8, or this kernel's GLU
// epilogue): q1_w1 without the per-workgroup quantization. xq holds the
// rounded values q·d_x, xsum each 32's Σ q·d_x. Each row's arithmetic is
// q1_w1's with the same KSV slices of K and chunks of CB blocks (slice sl
// sums, chunk by chunk, blocks sl·CB/KSV … of each chunk; the slices'
// sums are added in slice order), so the two agree bit for bit; here the
// 256 threads are RPW rows × KS threads, each thread V = KSV/KS slices.
// With GLU the workgroup owns 32 rows of the first matrix (gate) and the
// same 32 of the second (up): it writes up's values, h = silu(gate)·up
// (as elementwise.wgsl) over gate's, and h's Q8_0 rounding (hq, hsum) for
// the down projection.
// Constants: K, NB (=K/128), RPW, KS (=256/RPW), V, KSV (=KS·V), RED
// (=KSV·RPW), CB, M0,
// M1, Q1M0, Q1M1, Q1MT; flags OUT2, OUT3, ADD, GLU.
//#include q1_layout
//#include cpu_math
@group(0) @binding(0) var<storage, read> bits: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> xq: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> xsum: array<f32>;
@group(0) @binding(4) var<storage, read_write> dst0: array<f32>;
//#if OUT2
@group(0) @binding(5) var<storage, read_write> dst1: array<f32>;
//#endif
//#if OUT3
@group(0) @binding(6) var<storage, read_write> dst2: array<f32>;
//#endif
//#if ADD
@group(0) @binding(7) var<storage, read_write> resid: array<f32>;
//#endif
//#if GLU
@group(0) @binding(8) var<storage, read_write> hq: array<f32>;
@group(0) @binding(9) var<storage, read_write> hsum: array<f32>;
var<workgroup> gu: array<f32, 64>;
//#endif

var<workgroup> red: array<f32, RED>; // KSV·RPW

// masked_sum is Σ of the 32 activations from vec4 index xi whose bit is
// set in w, in q1_w1's order.
fn masked_sum(w: u32, xi: u32) -> f32 {
	var a = 0.0;
	for (var v = 0u; v < 8u; v++) {
		let xv = xq[xi + v];
		let sh = v * 4u;
		if ((w & (1u << sh)) != 0u) {
			a += xv.x;
		}
		if ((w & (2u << sh)) != 0u) {
			a += xv.y;
		}
		if ((w & (4u << sh)) != 0u) {
			a += xv.z;
		}
		if ((w & (8u << sh)) != 0u) {
			a += xv.w;
		}
	}
	return a;
}

// slice_sum is row's sum over slice sl of K.
fn slice_sum(row: u32, sl: u32) -> f32 {
	var acc = 0.0;
	for (var c = 0u; c < NB; c += CB) {
		for (var bi = 0u; bi < CB / KSV; bi++) {
			let lb = sl * (CB / KSV) + bi;
			let at = q1_scale(row, c + lb);
			let wv = bits[at];
			var blk = 0.0;
			for (var j = 0u; j < 4u; j++) {
				let g = (c + lb) * 4u + j;
				blk += 2.0 * masked_sum(wv[j], g * 8u) - xsum[g];
			}
			acc += scales[at] * blk;
		}
	}
	return acc;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let rl = lid % RPW;
	let s = lid / RPW;
//#if GLU
	// rows 0…31 of the workgroup are gate's, 32…63 the same rows of up
	let hr = wid.x * 32u + rl % 32u;
	let row = select(hr, M0 + hr, rl >= 32u);
//#else
	let row = wid.x * RPW + rl;
//#endif
	for (var v = 0u; v < V; v++) {
		let sl = s * V + v;
		red[sl * RPW + rl] = slice_sum(row, sl);
	}
	workgroupBarrier();
	var t = 0.0;
	if (s == 0u) {
		t = red[rl];
		for (var k = 1u; k < KSV; k++) {
			t += red[k * RPW + rl];
		}
//#if GLU
		gu[rl] = t;
//#else
		store(row, t);
//#endif
	}
//#if GLU
	workgroupBarrier();
	// h over gate's rows and its Q8_0 rounding, as q1_w1 rounds its x
	var h = 0.0;
	if (lid < 32u) {
		h = ggml_silu(gu[lid]) * gu[32u + lid];
		dst0[hr] = h;
	} else if (lid < 64u) {
		dst1[hr] = gu[lid];
	}
	workgroupBarrier();
	if (lid < 32u) {
		gu[lid] = h;
	}
	workgroupBarrier();
	var amax = 0.0;
	for (var j = 0u; j < 32u; j++) {
		amax = max(amax, abs(gu[j]));
	}
	let dx = f16_round(div_rn(amax, 127.0));
	let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
	let q = round(h * id) * dx;
	workgroupBarrier();
	if (lid < 32u) {
		gu[lid] = q;
		hq[hr] = q;
	}
	workgroupBarrier();
	if (lid == 0u) {
		var sum = vec4<f32>(0.0);
		for (var j = 0u; j < 8u; j++) {
			sum += vec4<f32>(gu[4u * j], gu[4u * j + 1u], gu[4u * j + 2u], gu[4u * j + 3u]);
		}
		hsum[wid.x] = (sum.x + sum.y) + (sum.z + sum.w);
	}
//#endif
}

//#if GLU
//#else
fn store(row: u32, v: f32) {
	if (row < M0) {
		dst0[row] = v;
//#if ADD
		resid[row] = resid[row] + v;
//#endif
		return;
	}
//#if OUT2
	if (row < M1) {
		dst1[row - M0] = v;
		return;
	}
//#endif
//#if OUT3
	dst2[row - M1] = v;
//#endif
}
//#endif
