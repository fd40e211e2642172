// A Gated DeltaNet layer's input stage for one decoding step in one
// dispatch (Backend.FuseDeltaNetInputs), computing what this op sequence
// does, value for value: CausalConv over the projected q|k|v channels with
// the conv state, SiLU, the split into q, k and v, the L2 norm of each
// S-wide head of q and k, sigmoid(β) and the decay softplus(α + bias)·a.
// Workgroup g < 2·KHEADS + VHEADS takes channel group g (S channels: a q,
// k or v head), one more the gates. Each thread convolves its channels
// exactly as conv.wgsl does for one row and applies unary.wgsl's SiLU; a
// q/k head is then normed in place with l2norm.wgsl's sums, tree and scale
// (WG is the width that kernel uses for groups of S), so the bits are the
// unfused ops'.
// With PROJ the gates' projections come along: workgroup 2·KHEADS+VHEADS+r
// computes row r of β (r < VHEADS) or α from x as f32_matmul does for one
// row (64 threads striding over vec4 columns, its tree, x rounded in the
// load as quantize.wgsl rounds it: flag XBF16 or XF16), then gates it.
// Constants: S, KHEADS, VHEADS, CH (=(2·KHEADS+VHEADS)·S), W, WG, EPS
// (already divided by S), INVSQRTG (1/√S); with PROJ, XK4 (x's vec4s).
// With RUN the op steps one sequence's row in a pass over rows of several
// sequences: batch is that sequence's (1 row, its position, the row in
// the pass), and the state its sequence's.
//#if RUN
struct Batch { n: u32, pos: u32, row0: u32, chunk: u32 }
fn row0() -> u32 { return batch.row0; }
//#else
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
fn row0() -> u32 { return 0u; }
//#endif

// R0 is the row of the pass this step reads and writes (row0), S0 the
// first value of its conv state, START whether it continues one.
var<private> R0: u32;
var<private> S0: u32;
var<private> START: bool;
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> x: array<f32>; // the q|k|v projection, CH
@group(0) @binding(2) var<storage, read> w: array<f32>; // conv weights [c][t]
@group(0) @binding(3) var<storage, read_write> state: array<f32>; // W−1 rows of CH
@group(0) @binding(4) var<storage, read_write> qo: array<f32>;
@group(0) @binding(5) var<storage, read_write> ko: array<f32>;
@group(0) @binding(6) var<storage, read_write> vo: array<f32>;
@group(0) @binding(7) var<storage, read_write> beta: array<f32>; // in place
@group(0) @binding(8) var<storage, read_write> alpha: array<f32>; // in place: the decay
@group(0) @binding(9) var<storage, read> bias: array<f32>;
@group(0) @binding(10) var<storage, read> a: array<f32>;
// SLAB: a pass over one row of each of several sequences, workgroup y a
// row; the conv states of every slot lie in state, slot s's from
// s·CSTRIDE, and a row at position 0 starts from zero.
//#if SLAB
//#include rows
//#endif
//#if PINGPONG
// the conv state before the step, which stays (conv.wgsl's PINGPONG)
@group(0) @binding(14) var<storage, read> prev: array<f32>;
fn old(i: u32) -> f32 { return prev[i]; }
//#else
fn old(i: u32) -> f32 { return state[i]; }
//#endif
//#if PROJ
@group(0) @binding(11) var<storage, read> xg: array<vec4<f32>>; // the gates' input
@group(0) @binding(12) var<storage, read> wb: array<vec4<f32>>; // β's rows
@group(0) @binding(13) var<storage, read> wa: array<vec4<f32>>; // α's rows

//#include cpu_math

// xin is x's vec4 c rounded to the gate weights' activation type.
fn xin(c: u32) -> vec4<f32> {
	let v = xg[R0 * XK4 + c];
//#if XBF16
	let u = bitcast<vec4<u32>>(v);
	return bitcast<vec4<f32>>((u + vec4<u32>(0x7fffu) + ((u >> vec4<u32>(16u)) & vec4<u32>(1u))) & vec4<u32>(0xffff0000u));
//#else
//#if XF16
	return vec4<f32>(f16_round(v.x), f16_round(v.y), f16_round(v.z), f16_round(v.w));
//#else
	return v;
//#endif
//#endif
}

// project is row r of β (r < VHEADS) or of α times x, in f32_matmul's
// order for one row: threads lid < 64 stride over the vec4 columns, then
// its tree over 64.
fn project(r: u32, lid: u32) -> f32 {
	var acc = 0.0;
	if (lid < 64u) {
		for (var c = lid; c < XK4; c += 64u) {
			var wr: vec4<f32>;
			if (r < VHEADS) {
				wr = wb[r * XK4 + c];
			} else {
				wr = wa[(r - VHEADS) * XK4 + c];
			}
			acc += dot(wr, xin(c));
		}
		red[lid] = acc;
	}
	workgroupBarrier();
	for (var s = 32u; s > 0u; s >>= 1u) {
		if (lid < s) {
			red[lid] += red[lid + s];
		}
		workgroupBarrier();
	}
	return red[0];
}
//#endif

var<workgroup> red: array<f32, WG>;

fn softplus(v: f32) -> f32 {
	if (v > 20.0) {
		return v;
	}
	return log(1.0 + exp(v));
}

// conv is channel c's output for this step; the state moves on by one.
fn conv(c: u32) -> f32 {
	var win: array<f32, W>;
	var wt: array<f32, W>;
	for (var t = 0u; t < W; t++) {
		wt[t] = w[c * W + t];
		win[t] = 0.0;
	}
	if (START) {
		for (var t = 0u; t + 1u < W; t++) {
			win[t] = old(S0 + t * CH + c);
		}
	}
	win[W - 1u] = x[R0 * CH + c];
	var acc = 0.0;
	for (var t = 0u; t < W; t++) {
		acc += wt[t] * win[t];
	}
	for (var t = 0u; t + 1u < W; t++) {
		state[S0 + t * CH + c] = win[t + 1u];
	}
	return acc;
}

// headScale is l2norm.wgsl's scale for a head whose threads hold the
// partial sums of squares ss (each over j = lid, lid + WG, … in order).
fn headScale(lid: u32, ss: f32) -> f32 {
	red[lid] = ss;
	workgroupBarrier();
	for (var s = WG / 2u; s > 0u; s >>= 1u) {
		if (lid < s) {
			red[lid] += red[lid + s];
		}
		workgroupBarrier();
	}
	return 1.0 / sqrt(red[0] / f32(S) + EPS);
}

// qnorm and knorm are l2norm.wgsl's INPLACE pass over head h of q or k:
// the values go through memory as there, so the compiled sums and scale
// are the same code.
fn qnorm(h: u32, lid: u32) {
	var ss = 0.0;
	for (var j = lid; j < S; j += WG) {
		let v = qo[(R0 * KHEADS + h) * S + j];
		ss += v * v;
	}
	let scale = headScale(lid, ss);
	for (var j = lid; j < S; j += WG) {
		qo[(R0 * KHEADS + h) * S + j] = qo[(R0 * KHEADS + h) * S + j] * scale * INVSQRTG;
	}
}

fn knorm(h: u32, lid: u32) {
	var ss = 0.0;
	for (var j = lid; j < S; j += WG) {
		let v = ko[(R0 * KHEADS + h) * S + j];
		ss += v * v;
	}
	let scale = headScale(lid, ss);
	for (var j = lid; j < S; j += WG) {
		ko[(R0 * KHEADS + h) * S + j] = ko[(R0 * KHEADS + h) * S + j] * scale * INVSQRTG;
	}
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let g = wid.x;
//#if SLAB
	R0 = wid.y;
	if (R0 >= batch.n) {
		return;
	}
	S0 = row_seq(R0) * CSTRIDE;
	START = row_pos(R0) != 0u;
//#else
	R0 = row0();
	S0 = 0u;
	START = batch.pos != 0u;
//#endif
//#if PROJ
	if (g >= 2u * KHEADS + VHEADS) {
		let r = g - (2u * KHEADS + VHEADS);
		let v = project(r, lid);
		if (lid == 0u) {
			if (r < VHEADS) {
				beta[R0 * VHEADS + r] = 1.0 / (1.0 + exp(-v));
			} else {
				alpha[R0 * VHEADS + r - VHEADS] = softplus(v + bias[r - VHEADS]) * a[r - VHEADS];
			}
		}
		return;
	}
//#else
	if (g == 2u * KHEADS + VHEADS) {
		for (var j = lid; j < VHEADS; j += WG) {
			let o = R0 * VHEADS + j;
			beta[o] = 1.0 / (1.0 + exp(-beta[o]));
			alpha[o] = softplus(alpha[o] + bias[j]) * a[j];
		}
		return;
	}
//#endif
	for (var j = lid; j < S; j += WG) {
		let c = conv(g * S + j);
		let v = c / (1.0 + exp(-c));
		if (g < KHEADS) {
			qo[(R0 * KHEADS + g) * S + j] = v;
		} else if (g < 2u * KHEADS) {
			ko[(R0 * KHEADS + g - KHEADS) * S + j] = v;
		} else {
			vo[(R0 * VHEADS + g - 2u * KHEADS) * S + j] = v;
		}
	}
	// each thread reads back only what it wrote before the first barrier
	if (g < KHEADS) {
		qnorm(g, lid);
	} else if (g < 2u * KHEADS) {
		knorm(g - KHEADS, lid);
	}
}
