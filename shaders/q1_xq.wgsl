// Q1_0 matrix × one activation row (decode) whose Q8_0 rounding its
// producer already wrote (act_q8, rmsnorm with Q8, attn_sum with Q8, or
// this kernel's GLU epilogue): q1_w1's layout and arithmetic without its
// per-workgroup quantization. x comes as its lookup table (q8_tab, read
// with warp-uniform addresses): a 32-weight word is eight table loads, one
// per nibble, summing to the same bits as tested adds would. The WG threads
// are RPW rows × KS slices of K, slice s summing blocks s, s+KS, …; the
// slices' sums are added in slice order.
// With GLU the workgroup owns 32 rows of the first matrix (gate) and the
// same 32 of the second (up), RPW = 64: it writes up's values, h =
// silu(gate)·up (as elementwise.wgsl) over gate's, and h's Q8_0 rounding
// (hq, hsum) and table (htab) for the down projection.
// Constants: K, NB (=K/128), RPW, KS (=WG/RPW), WG, M0, M1, Q1M0, Q1M1,
// Q1MT; flags OUT2, OUT3, ADD, GLU.
//#include q1_layout
//#include cpu_math
//#include q8_tab
//#include q8_group
@group(0) @binding(0) var<storage, read> bits: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> xtab: array<f32>;
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
@group(0) @binding(10) var<storage, read_write> htab: array<vec4<f32>>;
var<workgroup> gu: array<f32, 64>;
//#endif

var<workgroup> red: array<f32, WG>;

// word_dot is Σ ±x over the 32 activations from group g4 (of four) with
// the signs of w, from the table.
fn word_dot(w: u32, g4: u32) -> f32 {
	var a = 0.0;
	for (var v = 0u; v < 8u; v++) {
		a += xtab[(g4 + v) * 16u + ((w >> (4u * v)) & 15u)];
	}
	return a;
}

// slice_sum is row's sum over slice sl of K.
fn slice_sum(row: u32, sl: u32) -> f32 {
	var acc = 0.0;
	for (var b = sl; b < NB; b += KS) {
		let at = q1_scale(row, b);
		let wv = bits[at];
		var blk = 0.0;
		for (var j = 0u; j < 4u; j++) {
			let g = b * 4u + j;
			blk += word_dot(wv[j], g * 8u);
		}
		acc += scales[at] * blk;
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
	red[lid] = slice_sum(row, s);
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
	if (lid < 32u) {
		htab[hr] = q8_entries(lid);
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
