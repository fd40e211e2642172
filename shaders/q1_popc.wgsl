// Q1_0 matrix × one activation row (decode), bit-serial: the thread's
// 32 activations are quantized to int8 (Q8_0 as llama.cpp's x86 build),
// biased to u8 and transposed into 8 bit planes P_p (bit i of P_p = bit p
// of q_i + 128), so that for a row's sign word b
//     Σ_{bit=1} (q_i + 128) = Σ_p 2^p · popcount(b & P_p)
// in exact integers: 8 and + popcount + shift-add per 32 weights and row,
// ~1.2 ops per weight against the 4 of the select-and-add in q1_matvec.
// Building the planes costs ~400 ops per word, shared by the workgroup's 16
// rows. Outputs as q1_matvec (up to three matrices back to back, ADD).
// Fused input (flag GLU): see xin.
// Constants: K, WORDS (=K/32), WG, RG (groups of 4 rows per workgroup:
// 4 for 16 rows), RED (=RG·WG), M0, M1; flags OUT2, OUT3, ADD.
//#include q1_vec_io
//#include q1_layout
//#include cpu_math

// plane_nibble gathers bit p of each byte of u (4 biased activations)
// into a 4-bit nibble.
fn plane_nibble(u: u32, p: u32) -> u32 {
	return (((u >> p) & 0x01010101u) * 0x01020408u) >> 24u;
}

// masked returns, for 4 rows' sign words b, Σ_{bit=1} (q_i + 128).
fn masked(b: vec4<u32>, P0: u32, P1: u32, P2: u32, P3: u32, P4: u32, P5: u32, P6: u32, P7: u32) -> vec4<u32> {
	var s = countOneBits(b & vec4<u32>(P0));
	s += countOneBits(b & vec4<u32>(P1)) << vec4<u32>(1u);
	s += countOneBits(b & vec4<u32>(P2)) << vec4<u32>(2u);
	s += countOneBits(b & vec4<u32>(P3)) << vec4<u32>(3u);
	s += countOneBits(b & vec4<u32>(P4)) << vec4<u32>(4u);
	s += countOneBits(b & vec4<u32>(P5)) << vec4<u32>(5u);
	s += countOneBits(b & vec4<u32>(P6)) << vec4<u32>(6u);
	s += countOneBits(b & vec4<u32>(P7)) << vec4<u32>(7u);
	return s;
}

fn rows4(row: u32, w: u32) -> vec4<u32> {
	return vec4<u32>(bits[q1_word(row, w)], bits[q1_word(row + 1u, w)],
		bits[q1_word(row + 2u, w)], bits[q1_word(row + 3u, w)]);
}

fn scales4(row: u32, s: u32) -> vec4<f32> {
	return vec4<f32>(scales[q1_scale(row, s)], scales[q1_scale(row + 1u, s)],
		scales[q1_scale(row + 2u, s)], scales[q1_scale(row + 3u, s)]);
}

// dot4 turns the biased masked sums into Σ ±q, scaled: 2·Σ_{bit=1} q − Σq.
fn dot4(b: vec4<u32>, m: vec4<u32>, sum: f32, d: vec4<f32>, dx: f32) -> vec4<f32> {
	let ms = vec4<f32>(m) - 128.0 * vec4<f32>(countOneBits(b));
	return d * (dx * (2.0 * ms - sum));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * (4u * RG);
	var acc: array<vec4<f32>, RG>;
	for (var r = 0u; r < RG; r++) {
		acc[r] = vec4<f32>(0.0);
	}
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
		var P0 = 0u;
		var P1 = 0u;
		var P2 = 0u;
		var P3 = 0u;
		var P4 = 0u;
		var P5 = 0u;
		var P6 = 0u;
		var P7 = 0u;
		var sum = 0.0;
		for (var j = 0u; j < 8u; j++) {
			let q = round(xs[j] * id);
			sum += dot(q, vec4<f32>(1.0));
			let u4 = vec4<u32>(q + 128.0);
			let u = u4.x | (u4.y << 8u) | (u4.z << 16u) | (u4.w << 24u);
			let sh = 4u * j;
			P0 |= plane_nibble(u, 0u) << sh;
			P1 |= plane_nibble(u, 1u) << sh;
			P2 |= plane_nibble(u, 2u) << sh;
			P3 |= plane_nibble(u, 3u) << sh;
			P4 |= plane_nibble(u, 4u) << sh;
			P5 |= plane_nibble(u, 5u) << sh;
			P6 |= plane_nibble(u, 6u) << sh;
			P7 |= plane_nibble(u, 7u) << sh;
		}
		let s = w / 4u;
		for (var r = 0u; r < RG; r++) {
			let b = rows4(row0 + 4u * r, w);
			acc[r] += dot4(b, masked(b, P0, P1, P2, P3, P4, P5, P6, P7), sum, scales4(row0 + 4u * r, s), dx);
		}
	}
	for (var r = 0u; r < RG; r++) {
		red[r * WG + lid] = acc[r];
	}
	workgroupBarrier();
	for (var st = WG / 2u; st > 0u; st >>= 1u) {
		if (lid < st) {
			for (var r = 0u; r < RG; r++) {
				red[r * WG + lid] += red[r * WG + lid + st];
			}
		}
		workgroupBarrier();
	}
	if (lid < 4u * RG) {
		let v = red[(lid / 4u) * WG];
		store(row0 + lid, v[lid % 4u]);
	}
}
