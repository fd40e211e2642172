// Q1_0 matrix × one activation row (decode) with a lookup table, for K a
// multiple of 2048. The select-and-add of q1_matvec costs ~4 ALU ops per
// weight; here, per chunk of 2048 activations, the workgroup quantizes x
// (Q8_0 as llama.cpp's x86 build) and tabulates for every group of four
// the 16 sums Σ_{bit j of nib} q_j. A row then needs, per four weights, one
// 4-bit extract, one workgroup-memory load and one add: Σ_{bit=1} q of a
// word is 8 lookups, and 2·Σ_{bit=1} q − Σq is its ±q dot (exact integers).
// The table is laid out [group%8][nibble][word] so that the 64 lanes of a
// row, one word each, hit 64 different banks.
// 256 threads: word w = lid % 64 of the chunk, rows rsub + 4·i (i < 8) of
// the workgroup's 32. Outputs as q1_matvec: up to three matrices stored back
// to back (rows < M0 → dst0, < M1 → dst1, else dst2), ADD adds dst0's rows
// into resid too.
// Constants: K, WORDS (=K/32), M0, M1; flags OUT2, OUT3, ADD.
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

//#include q1_layout
//#include cpu_math

const CH: u32 = 64u; // words per chunk
var<workgroup> lut: array<f32, 8192>;
var<workgroup> wid: array<f32, 64>;
var<workgroup> wdx: array<f32, 64>;
var<workgroup> wsum: array<f32, 64>;

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

// rowdot is row's contribution of word w (chunk word gw) of the chunk.
fn rowdot(row: u32, w: u32, gw: u32) -> f32 {
	let b = bits[q1_word(row, gw)];
	var m = 0.0;
	for (var k = 0u; k < 8u; k++) {
		m += lut[(k * 16u + ((b >> (4u * k)) & 15u)) * 64u + w];
	}
	return scales[q1_scale(row, gw / 4u)] * (wdx[w] * (2.0 * m - wsum[w]));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wgid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wgid.x * 32u;
	let w = lid % 64u;
	let rsub = lid / 64u;
	var accA = vec4<f32>(0.0);
	var accB = vec4<f32>(0.0);
	for (var c = 0u; c < WORDS / CH; c++) {
		workgroupBarrier();
		if (lid < 64u) {
			let base = (c * CH + lid) * 8u;
			var a = vec4<f32>(0.0);
			for (var j = 0u; j < 8u; j++) {
				a = max(a, abs(x[base + j]));
			}
			let amax = max(max(a.x, a.y), max(a.z, a.w));
			let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
			var s = vec4<f32>(0.0);
			for (var j = 0u; j < 8u; j++) {
				s += round(x[base + j] * id);
			}
			wid[lid] = id;
			wdx[lid] = f16_round(div_rn(amax, 127.0));
			wsum[lid] = dot(s, vec4<f32>(1.0));
		}
		workgroupBarrier();
		for (var g = lid; g < CH * 8u; g += 256u) {
			let gw = g / 8u;
			let k = g % 8u;
			let q = round(x[c * CH * 8u + g] * wid[gw]);
			let o = k * 16u * 64u + gw;
			lut[o] = 0.0;
			lut[o + 64u] = q.x;
			lut[o + 128u] = q.y;
			lut[o + 192u] = q.x + q.y;
			let z = q.z;
			lut[o + 256u] = z;
			lut[o + 320u] = q.x + z;
			lut[o + 384u] = q.y + z;
			lut[o + 448u] = q.x + q.y + z;
			let t = q.w;
			lut[o + 512u] = t;
			lut[o + 576u] = q.x + t;
			lut[o + 640u] = q.y + t;
			lut[o + 704u] = q.x + q.y + t;
			lut[o + 768u] = z + t;
			lut[o + 832u] = q.x + z + t;
			lut[o + 896u] = q.y + z + t;
			lut[o + 960u] = q.x + q.y + z + t;
		}
		workgroupBarrier();
		let gw = c * CH + w;
		accA.x += rowdot(row0 + rsub, w, gw);
		accA.y += rowdot(row0 + rsub + 4u, w, gw);
		accA.z += rowdot(row0 + rsub + 8u, w, gw);
		accA.w += rowdot(row0 + rsub + 12u, w, gw);
		accB.x += rowdot(row0 + rsub + 16u, w, gw);
		accB.y += rowdot(row0 + rsub + 20u, w, gw);
		accB.z += rowdot(row0 + rsub + 24u, w, gw);
		accB.w += rowdot(row0 + rsub + 28u, w, gw);
	}
	// reduce the 64 words of each row; the table's memory is free now
	workgroupBarrier();
	lut[lid] = accA.x;
	lut[256u + lid] = accA.y;
	lut[512u + lid] = accA.z;
	lut[768u + lid] = accA.w;
	lut[1024u + lid] = accB.x;
	lut[1280u + lid] = accB.y;
	lut[1536u + lid] = accB.z;
	lut[1792u + lid] = accB.w;
	workgroupBarrier();
	for (var s = 32u; s > 0u; s >>= 1u) {
		if (w < s) {
			for (var i = 0u; i < 8u; i++) {
				lut[i * 256u + lid] += lut[i * 256u + lid + s];
			}
		}
		workgroupBarrier();
	}
	if (lid < 32u) {
		// row r = rsub + 4·i sits at lut[i·256 + rsub·64]
		store(row0 + lid, lut[(lid / 4u) * 256u + (lid % 4u) * 64u]);
	}
}
