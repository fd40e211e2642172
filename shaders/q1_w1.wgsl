// Q1_0 matrix × one activation row (decode), one row per thread: the
// workgroup's 256 threads are RPW rows × KS slices of K, thread (r, s)
// summing row r over its slice. The block-interleaved layout
// (q1_layout) puts the RPW rows' 16-byte sign chunks of a block side by
// side, so a slice's loads coalesce; the activations are quantized once
// per workgroup and chunk of CB blocks (Q8_0 as llama.cpp's x86 build:
// values q·d_x, each 32's Σ q·d_x) into workgroup memory and read with
// uniform addresses. Per sign word, Σ_{bit=1} q·d_x by predicated adds is
// exact in f32 (at most 32 values of 7 bits times the same 11-bit d_x),
// and so is 2·Σ_{bit=1} − Σ; the block's four words are summed, scaled by
// the weight's d and accumulated. The KS partial sums of a row meet in
// workgroup memory.
// Outputs and fused inputs as q1_matvec (q1_vec_io).
// Constants: K, NB (=K/128), RPW, KS (=256/RPW), CB (blocks per chunk, a
// multiple of KS dividing NB), WG (=256), RED (≥ 256), M0, M1, Q1M0, Q1M1,
// Q1MT; flags W1, OUT2, OUT3, ADD, GLU.
//#include q1_vec_io
//#include q1_layout
//#include cpu_math

var<workgroup> xs: array<vec4<f32>, XS>;  // the chunk's quantized activations, CB·32
var<workgroup> xsum: array<f32, XSUM>;    // Σ of each 32 of them, CB·4

// masked_sum is Σ of the 32 chunk activations from vec4 index xi whose
// bit is set in w.
fn masked_sum(w: u32, xi: u32) -> f32 {
	var a = 0.0;
	for (var v = 0u; v < 8u; v++) {
		let xv = xs[xi + v];
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

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let rl = lid % RPW;
	let sl = lid / RPW;
	let row = wid.x * RPW + rl;
	let scale = norm_scale(lid);
	var acc = 0.0;
	for (var c = 0u; c < NB; c += CB) {
		for (var qb = lid; qb < CB * 4u; qb += 256u) {
			let base = c * 32u + qb * 8u;
			var v: array<vec4<f32>, 8>;
			var a = vec4<f32>(0.0);
			for (var j = 0u; j < 8u; j++) {
				v[j] = xin(base + j, scale);
				a = max(a, abs(v[j]));
			}
			let amax = max(max(a.x, a.y), max(a.z, a.w));
			let dx = f16_round(div_rn(amax, 127.0));
			let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
			var sum = vec4<f32>(0.0);
			for (var j = 0u; j < 8u; j++) {
				let q = round(v[j] * id) * dx;
				xs[qb * 8u + j] = q;
				sum += q;
			}
			xsum[qb] = (sum.x + sum.y) + (sum.z + sum.w);
		}
		workgroupBarrier();
		for (var bi = 0u; bi < CB / KS; bi++) {
			let lb = sl * (CB / KS) + bi;
			let at = q1_scale(row, c + lb);
			let wv = bits[at];
			var blk = 0.0;
			for (var j = 0u; j < 4u; j++) {
				blk += 2.0 * masked_sum(wv[j], (lb * 4u + j) * 8u) - xsum[lb * 4u + j];
			}
			acc += scales[at] * blk;
		}
		workgroupBarrier();
	}
	red[lid] = vec4<f32>(acc, 0.0, 0.0, 0.0);
	workgroupBarrier();
	if (sl == 0u) {
		var t = acc;
		for (var k = 1u; k < KS; k++) {
			t += red[k * RPW + rl].x;
		}
		store(row, t);
	}
}
