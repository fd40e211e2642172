// Rounds activations to a weight's vec-dot type and back to f32 ("fake
// quantization"), so the f32 matmul sees the values llama.cpp's integer
// dot products see. One thread per block of BLOCK values of one row.
// Constants: K, BLOCK, XROWS; flags Q8_0, Q8_K, F16, BF16.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

//#include cpu_math

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let blk = gid.x;
	let row = gid.y;
	if (blk >= K / BLOCK || row >= min(batch.n, XROWS)) {
		return;
	}
	let base = row * K + blk * BLOCK;
//#if Q8_0
	var amax = 0.0;
	for (var j = 0u; j < BLOCK; j++) {
		amax = max(amax, abs(x[base + j]));
	}
	let d = f16_round(div_rn(amax, 127.0));
	let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
	for (var j = 0u; j < BLOCK; j++) {
		dst[base + j] = round(x[base + j] * id) * d;
	}
//#endif
//#if Q8_K
	var amax = 0.0;
	var mx = 0.0;
	for (var j = 0u; j < BLOCK; j++) {
		let v = x[base + j];
		if (abs(v) > amax) {
			amax = abs(v);
			mx = v;
		}
	}
	if (amax == 0.0) {
		for (var j = 0u; j < BLOCK; j++) {
			dst[base + j] = 0.0;
		}
		return;
	}
	let iscale = div_rn(-127.0, mx);
	let d = 1.0 / iscale;
	for (var j = 0u; j < BLOCK; j++) {
		// ggml's nearest_int (the 1.5·2²³ trick) rounds half to even, as round().
		dst[base + j] = min(127.0, round(iscale * x[base + j])) * d;
	}
//#endif
//#if F16
	for (var j = 0u; j < BLOCK; j++) {
		dst[base + j] = f16_round(x[base + j]);
	}
//#endif
//#if BF16
	for (var j = 0u; j < BLOCK; j++) {
		let u = bitcast<u32>(x[base + j]);
		let r = (u + 0x7fffu + ((u >> 16u) & 1u)) & 0xffff0000u;
		dst[base + j] = bitcast<f32>(r);
	}
//#endif
}
