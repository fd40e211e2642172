// store_kv for a cache with a Q8_0 K or V (kv_q8): writes the active rows
// of k and v into one layer's cache at positions pos … pos+n−1, a
// quantized one rotated and quantized by blocks of 32 (kv_q8), an f16 one
// as store_kv does. Workgroup (kv head, row): the head's values go to
// workgroup memory for the rotation and the blocks' max.
// Constants: D, KVD, XROWS, CTX, LAYER_OFF (an f16 side's u32 words),
// Q8_OFF, SOFF, WG, KROT, KRS (1/√KROT), VROT, VRS; flags KQ8, VQ8.
//#include cpu_math
//#include kv_q8
//#include store_q8
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read_write> kc: array<u32>;
@group(0) @binding(4) var<storage, read_write> vc: array<u32>;
//#include rows

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let g = wid.x;
	let row = wid.y;
	if (row >= min(batch.n, XROWS)) {
		return;
	}
	let pos = row_base(row) + row_pos(row);
	if (pos >= CTX) {
		return;
	}
	let src = row * KVD + g * D;
	for (var j = lid; j < D; j += WG) {
		kh[j] = k[src + j] * KRS;
		vh[j] = v[src + j] * VRS;
	}
	store_heads(lid, pos, g);
}
