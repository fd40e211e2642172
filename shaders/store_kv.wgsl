// Writes the active rows of k and v into one layer's f16 cache at
// positions pos … pos+n−1. Values are packed two per u32
// (pack2x16float), row-major [CTX][KVD/2] per layer. One thread per pair.
// Constants: KVD (kv heads × head_dim), XROWS, CTX, LAYER_OFF (u32 words).
//#include cpu_math
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> k: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> v: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> kc: array<u32>;
@group(0) @binding(4) var<storage, read_write> vc: array<u32>;
//#include rows

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let p = gid.x;
	let row = gid.y;
	if (p >= KVD / 2u || row >= min(batch.n, XROWS)) {
		return;
	}
	let pos = row_base(row) + row_pos(row);
	if (pos >= CTX) {
		return;
	}
	let src = row * (KVD / 2u) + p;
	let o = LAYER_OFF + pos * (KVD / 2u) + p;
	kc[o] = f16_pack(k[src]);
	vc[o] = f16_pack(v[src]);
}
