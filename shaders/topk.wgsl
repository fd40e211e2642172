// The K best (id, logit) of the last active row of x under the sampler's
// order: logit descending, lower id first on ties, −0 equal to +0; a NaN
// sorts before everything, so the result starts with one when the row
// holds any (the host then samples the whole row). One pass sorts N
// entries per workgroup (bitonic, in workgroup memory) and keeps the first
// K: over the row's logits (SRC_LOGITS), or over the K-entry lists of the
// previous pass, LISTS of them per workgroup. FINAL writes (id, logit
// bits) pairs; other passes (key, id) pairs for the next.
// Constants: COLS, XROWS, K, COUNT (entries in), PER (entries per
// workgroup), N (the sort's size, a power of two ≥ PER).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> x: array<f32>;
//#if SRC_LOGITS
//#else
@group(0) @binding(2) var<storage, read> src: array<u32>;
//#endif
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;

const WG = 256u;

var<workgroup> keys: array<u32, N>;
var<workgroup> ids: array<u32, N>;

// key maps a logit to a u32 whose order is the logit's (NaN highest,
// both zeros one key).
fn key(v: f32) -> u32 {
	var b = bitcast<u32>(v);
	if ((b & 0x7fffffffu) > 0x7f800000u) {
		return 0xffffffffu;
	}
	if ((b & 0x7fffffffu) == 0u) {
		b = 0u;
	}
	if ((b & 0x80000000u) != 0u) {
		return ~b;
	}
	return b | 0x80000000u;
}

// before: entry i goes before entry j.
fn before(i: u32, j: u32) -> bool {
	return keys[i] > keys[j] || (keys[i] == keys[j] && ids[i] < ids[j]);
}

fn rowBase() -> u32 {
	return (min(batch.n, XROWS) - 1u) * COLS;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let first = wid.x * PER;
	let end = min(COUNT, first + PER);
	let base = rowBase();
	for (var i = lid; i < N; i += WG) {
		// padding: key 0 (below −∞) and the largest id sort last
		var k = 0u;
		var id = 0xffffffffu;
		let e = first + i;
		if (i < PER && e < end) {
//#if SRC_LOGITS
			k = key(x[base + e]);
			id = e;
//#else
			k = src[2u * e];
			id = src[2u * e + 1u];
//#endif
		}
		keys[i] = k;
		ids[i] = id;
	}
	workgroupBarrier();
	for (var size = 2u; size <= N; size <<= 1u) {
		for (var stride = size >> 1u; stride > 0u; stride >>= 1u) {
			for (var p = lid; p < N / 2u; p += WG) {
				let i = 2u * stride * (p / stride) + p % stride;
				let j = i + stride;
				// the first half of each block of size goes in order
				let up = (i & size) == 0u;
				if (select(before(i, j), before(j, i), up)) {
					let ki = keys[i];
					let ii = ids[i];
					keys[i] = keys[j];
					ids[i] = ids[j];
					keys[j] = ki;
					ids[j] = ii;
				}
			}
			workgroupBarrier();
		}
	}
	for (var i = lid; i < K; i += WG) {
		let o = 2u * (wid.x * K + i);
//#if FINAL
		var bits = 0u;
		if (ids[i] < COLS) {
			bits = bitcast<u32>(x[base + ids[i]]);
		}
		dst[o] = ids[i];
		dst[o + 1u] = bits;
//#else
		dst[o] = keys[i];
		dst[o + 1u] = ids[i];
//#endif
	}
}
