// Decode attention for short sequences in one dispatch of one workgroup
// per query head, built for latency: the layer's q/k RMSNorm+RoPE, the KV
// store and softmax attention over up to 32·R positions, with no thread
// walking a long serial chain. The 256 threads are 32 positions × 8 slices
// of D/8 dims: each issues its K and V loads of all R rounds before the
// prologue (so their latency hides behind it), scores its slice of each
// position, and the 8 slices are summed by one thread per position. The
// max and Σexp over the ≤ 32·R scores are tree reductions in workgroup
// memory (log2 of them in barrier steps: in series, every thread walking
// all the scores was the kernel's longest chain), each thread weighs its
// own positions' V slice, and the 32 position rows are summed in two
// levels. Numerics as the split
// path, with other summation orders: q rounded to f16, K/V from the f16
// cache, the weights exp(s − M)/L rounded to f16 before they meet V. The
// prologue is qk_rope_store's arithmetic and order (qk_norm_rope), and the
// new position's k and v come from this workgroup's own copy, not the cache,
// which a sibling may not have written yet.
// With a Q8_0 K or V (KVQ, kv_q8) every workgroup rotates and quantizes
// the new k and v (store_q8's q8_heads) and reads the new position from
// those words; a thread's D/8 dims of a position are D/32 int8 words in
// one block, with its scale. With KQ8 q is rotated and quantized to Q8_0
// as K (attn_blk's load_q), each slice's integer dot times both scales;
// with VQ8 the weights meet V in f32 and the output is rotated back
// (VROTATE), as llama.cpp's flash attention does.
// Constants: HEADS, QPG, D (64 or 128), KVD, LAYER_OFF (a multiple of 4),
// SCALE, DIMS, QEPS, KEPS, NRWG, CTX, R (rounds of 32 positions), kv_q8's
// with KVQ; flags Q8, TAB (with Q8, also the output's lookup table,
// q8_tab), LAT (always: store_q8 leaves out its store).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> qw: array<f32>;
@group(0) @binding(2) var<storage, read> kw: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read> q: array<f32>;
@group(0) @binding(5) var<storage, read> k: array<f32>;
@group(0) @binding(6) var<storage, read> v: array<vec2<f32>>;
//#if KQ8
@group(0) @binding(7) var<storage, read_write> kc: array<u32>;
//#else
@group(0) @binding(7) var<storage, read_write> kc: array<vec4<u32>>;
//#endif
//#if VQ8
@group(0) @binding(8) var<storage, read_write> vc: array<u32>;
//#else
@group(0) @binding(8) var<storage, read_write> vc: array<vec4<u32>>;
//#endif
@group(0) @binding(9) var<storage, read_write> dst: array<f32>;
//#include cpu_math
//#if KVQ
//#include kv_q8
//#include store_q8
//#endif
//#if Q8
@group(0) @binding(10) var<storage, read_write> xq: array<f32>;
@group(0) @binding(11) var<storage, read_write> xsum: array<f32>;
//#if TAB
@group(0) @binding(12) var<storage, read_write> xtab: array<vec4<f32>>;
//#include q8_tab
//#endif
//#include q8_group
//#endif

const WG: u32 = 256u;
const NEG: f32 = -3.0e38;
const VH: u32 = 2u * NRWG;
const NW: u32 = D / 64u; // cache words (8 f16) of a thread's D/8 dims
const ROW: u32 = KVD / 8u; // a cache row in vec4 words
const OFF: u32 = LAYER_OFF / 4u;
const P: u32 = 32u * R; // positions taken
const RW: u32 = R * NW; // a thread's cache words
const AW: u32 = 2u * NW; // a thread's output vec4s
const PD: u32 = 8u * P;
const PVS: u32 = 8u * D;
const GR: u32 = WG / (D / 4u); // row groups of the final sum: 8 for D = 128, 16 for 64

var<workgroup> nred: array<f32, VH>;
var<workgroup> qh: array<f32, D>; // the rotated q head, f16-rounded
//#if KVQ
//#else
var<workgroup> kh: array<f32, D>; // the rotated k head
//#endif
//#if KQ8
var<workgroup> qsd: array<f32, NB>; // with KQ8 q's block scales
//#endif
var<workgroup> pd: array<f32, PD>; // per (position, slice) partial dots, then the softmax trees
var<workgroup> ex: array<f32, P>; // exp(s − M)
var<workgroup> pvs: array<vec4<f32>, PVS>; // per (position mod 32, dims) Σ p·V

// kpack is dims 8w … 8w+7 of the new k, f16-packed as the cache holds them.
fn kpack(w: u32) -> vec4<u32> {
	return vec4<u32>(f16_pack(vec2<f32>(kh[8u * w], kh[8u * w + 1u])), f16_pack(vec2<f32>(kh[8u * w + 2u], kh[8u * w + 3u])),
		f16_pack(vec2<f32>(kh[8u * w + 4u], kh[8u * w + 5u])), f16_pack(vec2<f32>(kh[8u * w + 6u], kh[8u * w + 7u])));
}

// vpack is dims 8w … 8w+7 of the new v of kv head g, f16-packed.
fn vpack(g: u32, w: u32) -> vec4<u32> {
	let i = g * (D / 2u) + 4u * w;
	return vec4<u32>(f16_pack(v[i]), f16_pack(v[i + 1u]), f16_pack(v[i + 2u]), f16_pack(v[i + 3u]));
}

// dot8 is q's dims 8w … 8w+7 against the cache word kw.
fn dot8(w: u32, k4: vec4<u32>) -> f32 {
	let k0 = unpack2x16float(k4.x);
	let k1 = unpack2x16float(k4.y);
	let k2 = unpack2x16float(k4.z);
	let k3 = unpack2x16float(k4.w);
	let a = qh[8u * w] * k0.x + qh[8u * w + 1u] * k0.y + qh[8u * w + 2u] * k1.x + qh[8u * w + 3u] * k1.y;
	let b = qh[8u * w + 4u] * k2.x + qh[8u * w + 5u] * k2.y + qh[8u * w + 6u] * k3.x + qh[8u * w + 7u] * k3.y;
	return a + b;
}

//#include qk_norm_rope

// A thread's int8 words of a Q8_0 position (its D/8 dims) and the block
// they lie in.
const KW: u32 = D / 32u;

//#if KQ8
// dot_q8 is q's slice s (quantized) against K's int8 words k4 (KW of
// them) of the block with scale kd.
fn dot_q8(s: u32, k4: vec4<u32>, kd: f32) -> f32 {
	var acc = 0.0;
	for (var j = 0u; j < KW; j++) {
		let o = 4u * (s * KW + j);
		acc += dot(vec4<f32>(qh[o], qh[o + 1u], qh[o + 2u], qh[o + 3u]), i8x4(k4[j]));
	}
	return acc * (qsd[s * KW / 8u] * kd);
}
//#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let h = wid.x;
	let g = h / QPG;
	let t = lid / 8u; // position t + 32r of round r
	let s = lid % 8u; // dims s·D/8 …
	// the cache words of all rounds, before anything waits
	var kr: array<vec4<u32>, RW>;
	var vr: array<vec4<u32>, RW>;
//#if KVQ
	// with a Q8_0 side: round r's int8 words in its kr[r] or vr[r], the
	// block's scale in kd[r] or vd[r]
	var kd: array<f32, R>;
	var vd: array<f32, R>;
	let sb = s * KW / 8u;
	for (var r = 0u; r < R; r++) {
		let tp = t + 32u * r;
		if (tp < batch.pos) {
//#if KQ8
			for (var j = 0u; j < KW; j++) {
				kr[r][j] = kc[q8_qi(tp, g, s * KW + j)];
			}
			kd[r] = q8_scale(kc[q8_si(tp, g, sb)], sb);
//#else
			for (var i = 0u; i < NW; i++) {
				kr[r * NW + i] = kc[OFF + tp * ROW + g * (D / 8u) + s * NW + i];
			}
//#endif
//#if VQ8
			for (var j = 0u; j < KW; j++) {
				vr[r][j] = vc[q8_qi(tp, g, s * KW + j)];
			}
			vd[r] = q8_scale(vc[q8_si(tp, g, sb)], sb);
//#else
			for (var i = 0u; i < NW; i++) {
				vr[r * NW + i] = vc[OFF + tp * ROW + g * (D / 8u) + s * NW + i];
			}
//#endif
		}
	}
//#else
	for (var r = 0u; r < R; r++) {
		let tp = t + 32u * r;
		for (var i = 0u; i < NW; i++) {
			if (tp < batch.pos) {
				let o = OFF + tp * ROW + g * (D / 8u) + s * NW + i;
				kr[r * NW + i] = kc[o];
				vr[r * NW + i] = vc[o];
			}
		}
	}
//#endif
	qk_norm_rope(lid, h, g);
	let pos = batch.pos;
	workgroupBarrier();
	let seq = pos + 1u;
//#if KVQ
	for (var j = lid; j < D; j += WG) {
		kh[j] *= KRS;
		vh[j] = v[(g * D + j) / 2u][j % 2u] * VRS;
	}
	q8_heads(lid);
//#if KQ8
	// q as attn_blk's q8_query quantizes it
	for (var hb = 1u; hb < KROT; hb <<= 1u) {
		if (lid < D / 2u) {
			let j = lid / hb * 2u * hb + lid % hb;
			let a = qh[j];
			let b = qh[j + hb];
			qh[j] = a + b;
			qh[j + hb] = a - b;
		}
		workgroupBarrier();
	}
	if (lid < NB) {
		var amax = 0.0;
		for (var j = 0u; j < 32u; j++) {
			amax = max(amax, abs(qh[32u * lid + j]));
		}
		let p = q8_params(amax);
		qsd[lid] = p.x;
		for (var j = 0u; j < 32u; j++) {
			qh[32u * lid + j] = round(qh[32u * lid + j] * p.y);
		}
	}
	workgroupBarrier();
//#endif
//#endif
	if (h % QPG == 0u && pos < CTX) {
		for (var w = lid; w < D / 8u; w += WG) {
			let o = OFF + pos * ROW + g * (D / 8u) + w;
//#if KQ8
			kc[q8_qi(pos, g, 2u * w)] = kqw[2u * w];
			kc[q8_qi(pos, g, 2u * w + 1u)] = kqw[2u * w + 1u];
//#else
			kc[o] = kpack(w);
//#endif
//#if VQ8
			vc[q8_qi(pos, g, 2u * w)] = vqw[2u * w];
			vc[q8_qi(pos, g, 2u * w + 1u)] = vqw[2u * w + 1u];
//#else
			vc[o] = vpack(g, w);
//#endif
		}
//#if KQ8
		for (var w = lid; w < SH; w += WG) {
			kc[q8_si(pos, g, 2u * w)] = ksword(w);
		}
//#endif
//#if VQ8
		for (var w = lid; w < SH; w += WG) {
			vc[q8_si(pos, g, 2u * w)] = vsword(w);
		}
//#endif
	}
	// scores of the thread's slice, the new position's from kh and v
	for (var r = 0u; r < R; r++) {
		let tp = t + 32u * r;
		var acc = 0.0;
//#if KVQ
		if (tp == pos) {
			for (var j = 0u; j < KW; j++) {
//#if KQ8
				kr[r][j] = kqw[s * KW + j];
//#endif
//#if VQ8
				vr[r][j] = vqw[s * KW + j];
//#endif
			}
//#if KQ8
			kd[r] = ksc[sb];
//#endif
//#if VQ8
			vd[r] = vsc[sb];
//#endif
		}
//#endif
//#if KQ8
		acc = dot_q8(s, kr[r], kd[r]);
//#endif
		for (var i = 0u; i < NW; i++) {
			let w = s * NW + i;
			if (tp == pos) {
//#if KQ8
//#else
				kr[r * NW + i] = kpack(w);
//#endif
//#if VQ8
//#else
				vr[r * NW + i] = vpack(g, w);
//#endif
			}
//#if KQ8
//#else
			acc += dot8(w, kr[r * NW + i]);
//#endif
		}
		pd[tp * 8u + s] = acc;
	}
	workgroupBarrier();
	var sv = NEG;
	if (lid < P) {
		var d = 0.0;
		for (var i = 0u; i < 8u; i++) {
			d += pd[lid * 8u + i];
		}
		sv = select(NEG, d * SCALE, lid < seq);
	}
	// The partial dots are read: pd now holds two trees, the max of the
	// scores in [0, P) and Σexp in [P, 2P), log2(P) barrier steps each
	// instead of every thread walking all P scores in series.
	workgroupBarrier();
	if (lid < P) {
		pd[lid] = sv;
	}
	workgroupBarrier();
	for (var w = P / 2u; w > 0u; w >>= 1u) {
		if (lid < w) {
			pd[lid] = max(pd[lid], pd[lid + w]);
		}
		workgroupBarrier();
	}
	let m = pd[0];
	if (lid < P) {
		let e = select(0.0, ggml_exp(sv - m), lid < seq);
		ex[lid] = e;
		pd[P + lid] = e;
	}
	workgroupBarrier();
	for (var w = P / 2u; w > 0u; w >>= 1u) {
		if (lid < w) {
			pd[P + lid] += pd[P + lid + w];
		}
		workgroupBarrier();
	}
	let il = 1.0 / pd[P];
	// Σ p·V over the thread's positions, for its D/8 dims
	var acc: array<vec4<f32>, AW>;
	for (var r = 0u; r < R; r++) {
		let tp = t + 32u * r;
//#if VQ8
		// a Q8_0 V meets the weights in f32 (llama.cpp's flash attention)
		let p = select(0.0, ex[tp] * il, tp < seq);
		for (var j = 0u; j < KW; j++) {
			acc[j] += (p * vd[r]) * i8x4(vr[r][j]);
		}
//#else
		let p = select(0.0, f16_round(ex[tp] * il), tp < seq);
		for (var i = 0u; i < NW; i++) {
			let vw = vr[r * NW + i];
			acc[2u * i] += p * vec4<f32>(unpack2x16float(vw.x), unpack2x16float(vw.y));
			acc[2u * i + 1u] += p * vec4<f32>(unpack2x16float(vw.z), unpack2x16float(vw.w));
		}
//#endif
	}
	for (var i = 0u; i < 2u * NW; i++) {
		pvs[t * (D / 4u) + s * 2u * NW + i] = acc[i];
	}
	workgroupBarrier();
	// the 32 position rows summed in two levels: GR groups of 32/GR rows
	// (thread lid: quad lid % (D/4) of group lid / (D/4), its sum left in
	// the group's first row), then one thread per dim over the groups
	let qd = lid % (D / 4u);
	let gr = lid / (D / 4u);
	var part = vec4<f32>(0.0);
	for (var i = 0u; i < 32u / GR; i++) {
		part += pvs[(gr * (32u / GR) + i) * (D / 4u) + qd];
	}
	pvs[gr * (32u / GR) * (D / 4u) + qd] = part;
	workgroupBarrier();
	var val = 0.0;
	if (lid < D) {
		for (var i = 0u; i < GR; i++) {
			val += pvs[i * (32u / GR) * (D / 4u) + lid / 4u][lid % 4u];
		}
//#if VROTATE
	}
	// a Q8_0 V's rows were rotated by blocks of VROT: the output is
	// rotated back (pd is free: its trees are read)
	if (lid < D) {
		pd[lid] = val * VRS;
	}
	workgroupBarrier();
	for (var hb = 1u; hb < VROT; hb <<= 1u) {
		if (lid < D / 2u) {
			let j = lid / hb * 2u * hb + lid % hb;
			let a = pd[j];
			let b = pd[j + hb];
			pd[j] = a + b;
			pd[j + hb] = a - b;
		}
		workgroupBarrier();
	}
	if (lid < D) {
		val = pd[lid];
//#endif
		dst[h * D + lid] = val;
	}
//#if Q8
	let qr = q8_round(lid, val);
	if (lid < D) {
		xq[h * D + lid] = qr.x;
		if (lid % 32u == 0u) {
			xsum[(h * D + lid) / 32u] = qr.y;
		}
//#if TAB
		xtab[h * D + lid] = q8_entries(lid);
//#endif
	}
//#endif
}
