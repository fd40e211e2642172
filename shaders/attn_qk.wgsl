// Decode attention, pass 1 with its prologue (one token, split-KV):
// qk_rope_store and attn_stats in one dispatch. Workgroup (kv head g,
// split c) norms and rotates its QPG query heads and kv head g's k
// (qk_rope_store's arithmetic and summation order, its NRWG threads per
// head played by this workgroup's WG), keeps the rotated q f16-rounded in
// workgroup memory, and, in the last split (the one holding the new
// position), stores k and v into the f16 cache. Then it is attn_stats
// (attn_blk): each head's max and Σexp over the split, and every scaled
// score into sc for attn_pv (SCORED), which need not score again. With K4
// (the layer's K rows start on a 16-byte word) the cache is read and
// written in 16-byte words. q and k themselves
// are left as they came (other splits still read them); the host rotates
// them in place only if something else reads them.
// With KVQ (a Q8_0 K or V) the store is store_q8's and, with KQ8, the
// query is quantized as attn_blk's load_q quantizes it.
// Constants: HEADS, KVHEADS, QPG, D, KVD, QROWS, LAYER_OFF, SCALE, WIN, WG, RT (1), RDN
// (as attn_stats), DIMS, QEPS, KEPS, NRWG, VH (=(QPG+1)·NRWG), CTX, SCTX,
// kv_q8's with KVQ; flag K4 (the layer's K words, f16 or Q8_0, start on a
// 16-byte word).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> qw: array<f32>;
@group(0) @binding(2) var<storage, read> kw: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read> q: array<f32>;
@group(0) @binding(5) var<storage, read> k: array<f32>;
@group(0) @binding(6) var<storage, read> v: array<vec2<f32>>;
//#if K4
@group(0) @binding(7) var<storage, read_write> kc: array<vec4<u32>>;
//#else
@group(0) @binding(7) var<storage, read_write> kc: array<u32>;
//#endif
@group(0) @binding(8) var<storage, read_write> vc: array<u32>;
@group(0) @binding(9) var<storage, read_write> stats: array<vec2<f32>>;
@group(0) @binding(10) var<storage, read_write> sc: array<f32>;

//#include cpu_math
//#if KVQ
//#include kv_q8
//#include store_q8
//#endif
//#include attn_blk

fn kword4(t: u32, g: u32, i: u32) -> vec4<u32> {
//#if K4
	return kc[(LAYER_OFF + t * (KVD / 2u) + g * (D / 2u)) / 4u + i];
//#else
	let o = LAYER_OFF + t * (KVD / 2u) + g * (D / 2u) + 4u * i;
	return vec4<u32>(kc[o], kc[o + 1u], kc[o + 2u], kc[o + 3u]);
//#endif
}

// kpack is the rotated k's dims 8w … 8w+7, f16-packed as the cache holds them.
fn kpack(w: u32) -> vec4<u32> {
	return vec4<u32>(f16_pack(vec2<f32>(kh[8u * w], kh[8u * w + 1u])), f16_pack(vec2<f32>(kh[8u * w + 2u], kh[8u * w + 3u])),
		f16_pack(vec2<f32>(kh[8u * w + 4u], kh[8u * w + 5u])), f16_pack(vec2<f32>(kh[8u * w + 6u], kh[8u * w + 7u])));
}

var<workgroup> nred: array<f32, VH>;
//#if KVQ
//#else
var<workgroup> kh: array<f32, D>; // the rotated k head
//#endif

// head h < QPG is query head g·QPG + h, head QPG is k's head g
fn nload(g: u32, h: u32, j: u32) -> f32 {
	if (h < QPG) {
		return q[(g * QPG + h) * D + j];
	}
	return k[g * D + j];
}

fn nweight(h: u32, j: u32) -> f32 {
	if (h < QPG) {
		return qw[j];
	}
	return kw[j];
}

fn put(h: u32, j: u32, val: f32) {
	if (h < QPG) {
//#if KQ8
		qs[(h * D + j) / 4u][j % 4u] = val * KRS;
//#else
		qs[(h * D + j) / 4u][j % 4u] = f16_round(val);
//#endif
	} else {
		kh[j] = val;
	}
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let g = wid.x;
	let c = wid.y;
	if (c >= batch.splits) {
		return;
	}
	// per-head RMSNorm: virtual thread h·NRWG + t is qk_rope_store's thread
	// t of head h
	for (var vt = lid; vt < VH; vt += WG) {
		let h = vt / NRWG;
		var ss = 0.0;
		for (var j = vt % NRWG; j < D; j += NRWG) {
			let val = nload(g, h, j);
			ss += val * val;
		}
		nred[vt] = ss;
	}
	workgroupBarrier();
	for (var s = NRWG / 2u; s > 0u; s >>= 1u) {
		for (var vt = lid; vt < VH; vt += WG) {
			if (vt % NRWG < s) {
				nred[vt] += nred[vt + s];
			}
		}
		workgroupBarrier();
	}
	let pos = batch.pos;
	let half = DIMS / 2u;
	for (var i = lid; i < (QPG + 1u) * half; i += WG) {
		let h = i / half;
		let j = i % half;
		let scale = 1.0 / sqrt(nred[h * NRWG] / f32(D) + select(KEPS, QEPS, h < QPG));
		let a = nload(g, h, j) * scale * nweight(h, j);
		let b = nload(g, h, j + half) * scale * nweight(h, j + half);
		if (pos < CTX) {
			let cs = table[pos * half + j];
			put(h, j, a * cs.x - b * cs.y);
			put(h, j + half, a * cs.y + b * cs.x);
		} else {
			put(h, j, a);
			put(h, j + half, b);
		}
	}
	for (var i = lid; i < (QPG + 1u) * (D - DIMS); i += WG) {
		let h = i / (D - DIMS);
		let j = DIMS + i % (D - DIMS);
		let scale = 1.0 / sqrt(nred[h * NRWG] / f32(D) + select(KEPS, QEPS, h < QPG));
		put(h, j, nload(g, h, j) * scale * nweight(h, j));
	}
	workgroupBarrier();
	let seq = pos + 1u;
//#if KQ8
	q8_query(lid);
//#endif
//#if KVQ
	if (c == batch.splits - 1u && pos < CTX) {
		for (var j = lid; j < D; j += WG) {
			kh[j] *= KRS;
			vh[j] = v[(g * D + j) / 2u][j % 2u] * VRS;
		}
		store_heads(lid, pos, g);
	}
//#else
	if (c == batch.splits - 1u && pos < CTX) {
		for (var p = lid; p < D / 2u; p += WG) {
			let o = LAYER_OFF + pos * (KVD / 2u) + g * (D / 2u) + p;
//#if K4
			if (p % 4u == 0u) {
				kc[o / 4u] = kpack(p / 4u);
			}
//#else
			kc[o] = f16_pack(vec2<f32>(kh[2u * p], kh[2u * p + 1u]));
//#endif
			vc[o] = f16_pack(v[g * (D / 2u) + p]);
		}
	}
//#endif
	// the new k must be visible to this workgroup's tile loads
	storageBarrier();
	let span = split_span(seq, c);
	let t0 = span.x;
	let t1 = span.y;
	blk_stats(lid, g, t0, t1, t1);
	if (lid < QPG) {
		stats[(g * QPG + lid) * batch.splits + c] = ml[lid];
	}
}
