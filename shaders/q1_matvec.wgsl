// Q1_0 matrix × one activation row (decode). Weights as in q1_matmul
// (sign words row-major, f32 block scales). A workgroup computes 8 rows
// held as two vec4 accumulators, so no private array is ever indexed
// dynamically (which would spill to local memory). Each thread walks whole
// u32 words (32 weights = one Q8_0 block of x, quantized in registers as
// llama.cpp's x86 build does) and, for every bit position, adds the
// quantized x to the rows whose bit is set: 2·Σ_{bit=1} q − Σ q = Σ ±q.
//
// Up to three matrices stored back to back (q/k/v, gate/up) run as one
// dispatch: rows below M0 go to dst0, below M1 to dst1, the rest to dst2.
// With ADD (one output only) the result is also added to resid: the
// residual add that follows the attention-output and down projections,
// without a dispatch of its own.
// Fused inputs (flags NORM with NORMWG, EPS; GLU): see xin.
// Constants: K, WORDS (=K/32), WG, M0, M1; flags OUT2, OUT3, ADD.
@group(0) @binding(0) var<storage, read> bits: array<u32>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> dst0: array<f32>;
//#if OUT2
@group(0) @binding(4) var<storage, read_write> dst1: array<f32>;
//#endif
//#if OUT3
@group(0) @binding(5) var<storage, read_write> dst2: array<f32>;
//#endif
//#if ADD
@group(0) @binding(4) var<storage, read_write> resid: array<f32>;
//#endif
//#if NORM
@group(0) @binding(6) var<storage, read> nw: array<vec4<f32>>;
//#endif
//#if GLU
@group(0) @binding(6) var<storage, read> up: array<vec4<f32>>;
//#endif

var<workgroup> red: array<vec4<f32>, RED>;

fn add_set(m: vec4<f32>, b: vec4<u32>, mask: u32, v: f32) -> vec4<f32> {
	return m + select(vec4<f32>(0.0), vec4<f32>(v), (b & vec4<u32>(mask)) != vec4<u32>(0u));
}

// xin is four activations as the matvec sees them: with NORM, x is the
// un-normed row and this is the RMSNorm that the forward pass asked for
// (same arithmetic as rmsnorm.wgsl); with GLU, x is the gate and this is
// silu(gate)·up (as elementwise.wgsl). Fusing either saves a dispatch.
fn xin(i: u32, scale: f32) -> vec4<f32> {
	var v = x[i];
//#if NORM
	v = v * scale * nw[i];
//#endif
//#if GLU
	v = v / (1.0 + exp(-v)) * up[i];
//#endif
	return v;
}

// norm_scale is 1/rms(x) for NORM, summed in exactly the order of
// rmsnorm.wgsl run with NORMWG threads (thread t sums x_t, x_{t+NORMWG}, …,
// then a tree): this workgroup's WG threads each play NORMWG/WG of those
// threads and finish the tree's first levels in registers, so the fused
// norm is bit-identical to the separate one. Every workgroup recomputes it
// (K floats from L2) instead of waiting on a dispatch of its own.
fn norm_scale(lid: u32) -> f32 {
//#if NORM
	var part = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
	let per = max(NORMWG / WG, 1u);
	for (var k = 0u; k < per; k++) {
		let t = lid + k * WG;
		if (t < NORMWG) {
			var ss = 0.0;
			for (var j = t; j < K; j += NORMWG) {
				let v = x[j / 4u][j % 4u];
				ss += v * v;
			}
			part[k] = ss;
		}
	}
	for (var h = per / 2u; h > 0u; h >>= 1u) {
		for (var k = 0u; k < h; k++) {
			part[k] += part[k + h];
		}
	}
	red[lid] = vec4<f32>(part[0], 0.0, 0.0, 0.0);
	workgroupBarrier();
	for (var s = min(WG, NORMWG) / 2u; s > 0u; s >>= 1u) {
		if (lid < s) {
			red[lid] += red[lid + s];
		}
		workgroupBarrier();
	}
	let scale = 1.0 / sqrt(red[0].x / f32(K) + EPS);
	workgroupBarrier();
	return scale;
//#else
	return 1.0;
//#endif
}

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

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * 8u;
	let spr = WORDS / 4u;
	var accA = vec4<f32>(0.0);
	var accB = vec4<f32>(0.0);
	let scale = norm_scale(lid);
	for (var w = lid; w < WORDS; w += WG) {
		let base = w * 8u;
		var xs: array<vec4<f32>, 8>;
		var a = vec4<f32>(0.0);
		for (var j = 0u; j < 8u; j++) {
			xs[j] = xin(base + j, scale);
			a = max(a, abs(xs[j]));
		}
		let amax = max(max(a.x, a.y), max(a.z, a.w));
		let dx = unpack2x16float(pack2x16float(vec2<f32>(amax / 127.0, 0.0))).x;
		let id = select(0.0, 127.0 / amax, amax != 0.0);
		let bA = vec4<u32>(bits[row0 * WORDS + w], bits[(row0 + 1u) * WORDS + w],
			bits[(row0 + 2u) * WORDS + w], bits[(row0 + 3u) * WORDS + w]);
		let bB = vec4<u32>(bits[(row0 + 4u) * WORDS + w], bits[(row0 + 5u) * WORDS + w],
			bits[(row0 + 6u) * WORDS + w], bits[(row0 + 7u) * WORDS + w]);
		let s = w / 4u;
		let sA = vec4<f32>(scales[row0 * spr + s], scales[(row0 + 1u) * spr + s],
			scales[(row0 + 2u) * spr + s], scales[(row0 + 3u) * spr + s]);
		let sB = vec4<f32>(scales[(row0 + 4u) * spr + s], scales[(row0 + 5u) * spr + s],
			scales[(row0 + 6u) * spr + s], scales[(row0 + 7u) * spr + s]);
		var mA = vec4<f32>(0.0);
		var mB = vec4<f32>(0.0);
		var sum = 0.0;
		for (var j = 0u; j < 8u; j++) {
			let q = round(xs[j] * id);
			sum += dot(q, vec4<f32>(1.0));
			let m0 = 1u << (4u * j);
			mA = add_set(mA, bA, m0, q.x);
			mB = add_set(mB, bB, m0, q.x);
			mA = add_set(mA, bA, m0 << 1u, q.y);
			mB = add_set(mB, bB, m0 << 1u, q.y);
			mA = add_set(mA, bA, m0 << 2u, q.z);
			mB = add_set(mB, bB, m0 << 2u, q.z);
			mA = add_set(mA, bA, m0 << 3u, q.w);
			mB = add_set(mB, bB, m0 << 3u, q.w);
		}
		accA += sA * (dx * (2.0 * mA - sum));
		accB += sB * (dx * (2.0 * mB - sum));
	}
	red[lid] = accA;
	red[WG + lid] = accB;
	workgroupBarrier();
	for (var st = WG / 2u; st > 0u; st >>= 1u) {
		if (lid < st) {
			red[lid] += red[lid + st];
			red[WG + lid] += red[WG + lid + st];
		}
		workgroupBarrier();
	}
	if (lid < 8u) {
		let v = red[(lid / 4u) * WG];
		store(row0 + lid, v[lid % 4u]);
	}
}
