// Rounds activations to Q8_0 as quantize.wgsl does (the same q and d), but
// keeps them as integers for q1_lutgemm: words [k/4][token] of four i8
// (byte j is q of k = 4·word + j), token stride XS, then the scales
// [k/32][token] as f32 bits. Token-major words let a table builder's 32
// threads read 32 neighbouring token pairs in one 256-byte load.
// One thread per block of 32 values of one row.
// Constants: K, XROWS, XS (even, ≥ XROWS).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

//#include cpu_math

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let blk = gid.x;
	let row = gid.y;
	if (blk >= K / 32u || row >= min(batch.n, XROWS)) {
		return;
	}
	let base = row * K + blk * 32u;
	var amax = 0.0;
	for (var j = 0u; j < 32u; j++) {
		amax = max(amax, abs(x[base + j]));
	}
	let d = f16_round(div_rn(amax, 127.0));
	let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
	for (var w = 0u; w < 8u; w++) {
		var word = 0u;
		for (var j = 0u; j < 4u; j++) {
			let q = i32(round(x[base + w * 4u + j] * id));
			word |= (bitcast<u32>(q) & 0xffu) << (8u * j);
		}
		dst[(blk * 8u + w) * XS + row] = word;
	}
	dst[(K / 4u) * XS + blk * XS + row] = bitcast<u32>(d);
}
