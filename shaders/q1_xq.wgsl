// Q1_0 matrix × one activation row (decode) whose Q8_0 rounding its
// producer already wrote (act_q8, rmsnorm with Q8, attn_sum with Q8, or
// this kernel's GLU epilogue): q1_w1's layout and arithmetic without its
// per-workgroup quantization. xq holds the rounded values q·d_x, xsum each
// 32's Σ q·d_x; both are read with warp-uniform addresses. The WG threads
// are RPW rows × KS slices of K, slice s summing blocks s, s+KS, …; the
// slices' sums are added in slice order.
// With GLU the workgroup owns 32 rows of the first matrix (gate) and the
// same 32 of the second (up), RPW = 64: it writes up's values, h =
// silu(gate)·up (as elementwise.wgsl) over gate's, and h's Q8_0 rounding
// (hq, hsum) for the down projection.
// With NORM the kernel is also the RMSNorm before it (act_q8's NORM, one
// dispatch fewer per norm): every workgroup computes x's norm and Q8_0
// rounding into workgroup memory with act_q8's arithmetic in act_q8's order
// (its first 256 threads sum x² as act_q8's do; then one thread per block
// of 32), so the products are bit for bit the unfused pair's, and
// workgroup 0 also writes the normed row and its rounding (ndst, xq, xsum)
// as act_q8 would have. The weights' first block is loaded before the
// norm, so that the two latencies overlap.
// Constants: K, NB (=K/128), RPW, KS (=WG/RPW), WG, M0, M1, Q1M0, Q1M1,
// Q1MT, EPS (with NORM); flags OUT2, OUT3, ADD, GLU, NORM.
//#include q1_layout
//#include cpu_math
//#include q8_group
@group(0) @binding(0) var<storage, read> bits: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
//#if NORM
@group(0) @binding(2) var<storage, read_write> xq: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> xsum: array<f32>;
@group(0) @binding(10) var<storage, read> xraw: array<f32>;
@group(0) @binding(11) var<storage, read> nw: array<f32>;
@group(0) @binding(12) var<storage, read_write> ndst: array<f32>;
const XV: u32 = K / 4u;
const XB: u32 = K / 32u;
var<workgroup> xs: array<vec4<f32>, XV>;
var<workgroup> xss: array<f32, XB>;
//#else
@group(0) @binding(2) var<storage, read> xq: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> xsum: array<f32>;
//#endif
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

var<workgroup> red: array<f32, WG>;

// xqv and xsv read the rounded activations: from workgroup memory with
// NORM (this workgroup rounded them), else as the producer wrote them.
fn xqv(i: u32) -> vec4<f32> {
//#if NORM
	return xs[i];
//#else
	return xq[i];
//#endif
}

fn xsv(g: u32) -> f32 {
//#if NORM
	return xss[g];
//#else
	return xsum[g];
//#endif
}

//#if NORM
// norm_q8 is act_q8's NORM for the whole row into xs and xss (and, in
// workgroup 0, into ndst, xq and xsum); every thread calls it.
fn norm_q8(lid: u32, first: bool) {
	var ss = 0.0;
	if (lid < 256u) {
		for (var j = lid; j < K; j += 256u) {
			let val = xraw[j];
			ss += val * val;
		}
		red[lid] = ss;
	}
	workgroupBarrier();
	for (var w = 128u; w > 0u; w >>= 1u) {
		if (lid < w) {
			red[lid] += red[lid + w];
		}
		workgroupBarrier();
	}
	let scale = 1.0 / sqrt(red[0] / f32(K) + EPS);
	for (var blk = lid; blk < K / 32u; blk += WG) {
		var v: array<f32, 32>;
		var amax = 0.0;
		for (var j = 0u; j < 32u; j++) {
			let i = blk * 32u + j;
			v[j] = xraw[i] * scale * nw[i];
			amax = max(amax, abs(v[j]));
		}
		let dx = f16_round(div_rn(amax, 127.0));
		let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
		var sum = vec4<f32>(0.0);
		for (var j = 0u; j < 8u; j++) {
			let q = vec4<f32>(round(v[4u * j] * id) * dx, round(v[4u * j + 1u] * id) * dx,
				round(v[4u * j + 2u] * id) * dx, round(v[4u * j + 3u] * id) * dx);
			xs[blk * 8u + j] = q;
			sum += q;
			if (first) {
				xq[blk * 8u + j] = q;
			}
		}
		let t = (sum.x + sum.y) + (sum.z + sum.w);
		xss[blk] = t;
		if (first) {
			xsum[blk] = t;
			for (var j = 0u; j < 32u; j++) {
				ndst[blk * 32u + j] = v[j];
			}
		}
	}
	workgroupBarrier();
}
//#endif

// masked_sum is Σ of the 32 activations from vec4 index xi whose bit is
// set in w, in q1_w1's order.
fn masked_sum(w: u32, xi: u32) -> f32 {
	var a = 0.0;
	for (var v = 0u; v < 8u; v++) {
		let xv = xqv(xi + v);
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

// block_sum is block b's Σ over its 128 weights (sign words wv), unscaled.
fn block_sum(wv: vec4<u32>, b: u32) -> f32 {
	var blk = 0.0;
	for (var j = 0u; j < 4u; j++) {
		let g = b * 4u + j;
		blk += 2.0 * masked_sum(wv[j], g * 8u) - xsv(g);
	}
	return blk;
}

// slice_sum is row's sum over slice sl of K, the slice's first block's
// sign words and scale (wv0, sc0) loaded by the caller.
fn slice_sum(row: u32, sl: u32, wv0: vec4<u32>, sc0: f32) -> f32 {
	var acc = 0.0;
	if (sl < NB) {
		acc += sc0 * block_sum(wv0, sl);
	}
	for (var b = sl + KS; b < NB; b += KS) {
		let at = q1_scale(row, b);
		acc += scales[at] * block_sum(bits[at], b);
	}
	return acc;
}

@compute @workgroup_size(WG)
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
	var wv0 = vec4<u32>(0u);
	var sc0 = 0.0;
	if (s < NB) {
		let at = q1_scale(row, s);
		wv0 = bits[at];
		sc0 = scales[at];
	}
//#if NORM
	norm_q8(lid, wid.x == 0u);
//#endif
	red[lid] = slice_sum(row, s, wv0, sc0);
	workgroupBarrier();
	if (s == 0u) {
		var t = red[rl];
		for (var k = 1u; k < KS; k++) {
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
	var h = 0.0;
	if (lid < 32u) {
		h = ggml_silu(gu[lid]) * gu[32u + lid];
		dst0[hr] = h;
	} else if (lid < 64u) {
		dst1[hr] = gu[lid];
	}
	let r = q8_round(lid, h);
	if (lid < 32u) {
		hq[hr] = r.x;
	}
	if (lid == 0u) {
		hsum[wid.x] = r.y;
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
