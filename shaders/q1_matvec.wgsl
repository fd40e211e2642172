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
// Fused input (flag GLU): see xin.
// Constants: K, WORDS (=K/32), WG, M0, M1; flags OUT2, OUT3, ADD.
//#include q1_vec_io
//#include q1_layout
//#include cpu_math

fn add_set(m: vec4<f32>, b: vec4<u32>, mask: u32, v: f32) -> vec4<f32> {
	return m + select(vec4<f32>(0.0), vec4<f32>(v), (b & vec4<u32>(mask)) != vec4<u32>(0u));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * 8u;
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
		let dx = f16_round(div_rn(amax, 127.0));
		let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
		let bA = vec4<u32>(bits[q1_word(row0, w)], bits[q1_word(row0 + 1u, w)],
			bits[q1_word(row0 + 2u, w)], bits[q1_word(row0 + 3u, w)]);
		let bB = vec4<u32>(bits[q1_word(row0 + 4u, w)], bits[q1_word(row0 + 5u, w)],
			bits[q1_word(row0 + 6u, w)], bits[q1_word(row0 + 7u, w)]);
		let s = w / 4u;
		let sA = vec4<f32>(scales[q1_scale(row0, s)], scales[q1_scale(row0 + 1u, s)],
			scales[q1_scale(row0 + 2u, s)], scales[q1_scale(row0 + 3u, s)]);
		let sB = vec4<f32>(scales[q1_scale(row0 + 4u, s)], scales[q1_scale(row0 + 5u, s)],
			scales[q1_scale(row0 + 6u, s)], scales[q1_scale(row0 + 7u, s)]);
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
