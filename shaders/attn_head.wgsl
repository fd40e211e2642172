// Decode attention in one dispatch, one workgroup per query head, with its
// prologue: the whole layer's RMSNorm+RoPE of q and k, the KV store and
// split-KV attention's three passes (attn_qk, attn_pv, attn_sum) become
// one launch of HEADS workgroups instead of three dependent launches of
// KVHEADS × splits (on a big GPU the short-context cost is the launches
// and the few busy workgroups, not the arithmetic).
// Workgroup h norms and rotates query head h and kv head g = h / QPG with
// attn_qk's arithmetic and summation order; the first workgroup of each
// group stores the new k and v, and every workgroup reads its own copy of
// the new position (f16-packed as the cache holds it) rather than the
// cache, which a sibling may not have written yet. The scores of the whole
// sequence stay in workgroup memory, laid out by the host's splits and
// tiles, and the softmax is summed in exactly the split path's order: a
// tree over each tile of TILE positions, a running rescale over the tiles
// of a split, then the splits combined in order; the weights
// exp(s − M)/L are rounded to f16 before they meet V, each split's Σ p·V
// runs over its positions in order and the splits are added in order (as
// attn_sum). So the output is the split path's to the bit wherever the
// compiler contracts alike. With Q8 also the output's Q8_0 rounding for
// the output projection's q1_xq (as attn_sum).
// Constants: HEADS, QPG, D (a multiple of 8), KVD, LAYER_OFF (a multiple
// of 4), SCALE, TILE, WG (a multiple of 32, ≥ D and of D/8), DIMS, QEPS, KEPS, NRWG, CTX, SLOTS (score slots:
// splits × tiles per split × TILE at the longest sequence taken), TSLOTS
// (SLOTS / TILE), MAXSPLITS;
// flags Q8, TAB (with Q8, also the output's lookup table, q8_tab).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> qw: array<f32>;
@group(0) @binding(2) var<storage, read> kw: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read> q: array<f32>;
@group(0) @binding(5) var<storage, read> k: array<f32>;
@group(0) @binding(6) var<storage, read> v: array<vec2<f32>>;
@group(0) @binding(7) var<storage, read_write> kc: array<vec4<u32>>;
@group(0) @binding(8) var<storage, read_write> vc: array<vec4<u32>>;
@group(0) @binding(9) var<storage, read_write> dst: array<f32>;
//#include cpu_math
//#if Q8
@group(0) @binding(10) var<storage, read_write> xq: array<f32>;
@group(0) @binding(11) var<storage, read_write> xsum: array<f32>;
//#if TAB
@group(0) @binding(12) var<storage, read_write> xtab: array<vec4<f32>>;
//#include q8_tab
//#endif
//#include q8_group
//#endif

const NEG: f32 = -3.0e38;
const VH: u32 = 2u * NRWG;
const RP: u32 = WG / (D / 8u); // splits summed side by side in Σ p·V
const ROW: u32 = KVD / 8u; // a cache row in vec4 words (8 f16)
const OFF: u32 = LAYER_OFF / 4u;
const PARTS: u32 = 2u * WG;

var<workgroup> nred: array<f32, VH>;
var<workgroup> qh: array<f32, D>; // the rotated q head, f16-rounded
var<workgroup> kh: array<f32, D>; // the rotated k head
var<workgroup> sc: array<f32, SLOTS>; // scaled scores, then weights
var<workgroup> ex: array<f32, SLOTS>; // exp(s − running max), summed per tile
var<workgroup> tm: array<f32, TSLOTS>; // running max after each tile
var<workgroup> sm: array<vec2<f32>, MAXSPLITS>; // each split's (max, Σexp)
var<workgroup> mlv: vec2<f32>; // softmax max M and 1/L
var<workgroup> part: array<vec4<f32>, PARTS>;
var<workgroup> outv: array<f32, D>;

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

// kword is dims 8w … 8w+7 of position t's k in kv head g.
fn kword(g: u32, t: u32, w: u32) -> vec4<u32> {
	if (t == batch.pos) {
		return kpack(w);
	}
	return kc[OFF + t * ROW + g * (D / 8u) + w];
}

// vword is dims 8w … 8w+7 of position t's v in kv head g.
fn vword(g: u32, t: u32, w: u32) -> vec4<u32> {
	if (t == batch.pos) {
		return vpack(g, w);
	}
	return vc[OFF + t * ROW + g * (D / 8u) + w];
}

// pv adds p·V_t to the two halves of a thread's 8 dims, as attn_pv's
// acc += p·v (one multiply-add per dim, positions in order).
fn pv(acc: ptr<function, array<vec4<f32>, 2>>, p: f32, vw: vec4<u32>) {
	(*acc)[0] += p * vec4<f32>(unpack2x16float(vw.x), unpack2x16float(vw.y));
	(*acc)[1] += p * vec4<f32>(unpack2x16float(vw.z), unpack2x16float(vw.w));
}

//#include qk_norm_rope

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let h = wid.x;
	let g = h / QPG;
	qk_norm_rope(lid, h, g);
	let pos = batch.pos;
	workgroupBarrier();
	let seq = pos + 1u;
	if (h % QPG == 0u && pos < CTX) {
		for (var w = lid; w < D / 8u; w += WG) {
			let o = OFF + pos * ROW + g * (D / 8u) + w;
			kc[o] = kpack(w);
			vc[o] = vpack(g, w);
		}
	}
	// Score slot c·span + r is position c·chunk + r of split c; a split's
	// tiles start every TILE positions from its first.
	let chunk = batch.chunk;
	let splits = batch.splits;
	let nt = (chunk + TILE - 1u) / TILE;
	let span = nt * TILE;
	for (var t = lid; t < seq; t += WG) {
		let c = t / chunk;
		var acc = 0.0;
		// score's order: dims 2w, 2w+1 per step
		for (var w = 0u; w < D / 8u; w++) {
			let kw = kword(g, t, w);
			let k0 = unpack2x16float(kw.x);
			acc += qh[8u * w] * k0.x + qh[8u * w + 1u] * k0.y;
			let k1 = unpack2x16float(kw.y);
			acc += qh[8u * w + 2u] * k1.x + qh[8u * w + 3u] * k1.y;
			let k2 = unpack2x16float(kw.z);
			acc += qh[8u * w + 4u] * k2.x + qh[8u * w + 5u] * k2.y;
			let k3 = unpack2x16float(kw.w);
			acc += qh[8u * w + 6u] * k3.x + qh[8u * w + 7u] * k3.y;
		}
		sc[c * span + t - c * chunk] = acc * SCALE;
	}
	workgroupBarrier();
	// each tile's max (exact in any order), then the running max over a
	// split's tiles, as tile_stats's mt
	for (var ti = lid; ti < splits * nt; ti += WG) {
		let c = ti / nt;
		let tb = c * chunk + (ti % nt) * TILE;
		let t1 = min(tb + TILE, min(c * chunk + chunk, seq));
		var mx = NEG;
		for (var t = tb; t < t1; t++) {
			mx = max(mx, sc[c * span + t - c * chunk]);
		}
		tm[ti] = mx;
	}
	workgroupBarrier();
	for (var c = lid; c < splits; c += WG) {
		var m = NEG;
		for (var i = 0u; i < nt; i++) {
			m = max(m, tm[c * nt + i]);
			tm[c * nt + i] = m;
		}
	}
	workgroupBarrier();
	for (var sl = lid; sl < splits * span; sl += WG) {
		let c = sl / span;
		let r = sl % span;
		var e = 0.0;
		if (r < chunk && c * chunk + r < seq) {
			e = ggml_exp(sc[sl] - tm[c * nt + r / TILE]);
		}
		ex[sl] = e;
	}
	workgroupBarrier();
	// tile_stats's tree over each tile's TILE threads
	for (var st = TILE / 2u; st > 0u; st >>= 1u) {
		for (var sl = lid; sl < splits * span; sl += WG) {
			if (sl % TILE < st) {
				ex[sl] += ex[sl + st];
			}
		}
		workgroupBarrier();
	}
	for (var c = lid; c < splits; c += WG) {
		let t1 = min(c * chunk + chunk, seq);
		var m = NEG;
		var l = 0.0;
		for (var i = 0u; i < nt && c * chunk + i * TILE < t1; i++) {
			let mt = tm[c * nt + i];
			l = l * ggml_exp(m - mt) + ex[(c * nt + i) * TILE];
			m = mt;
		}
		sm[c] = vec2<f32>(m, l);
	}
	workgroupBarrier();
	// attn_pv's combination of the splits
	if (lid == 0u) {
		var mx = NEG;
		for (var s = 0u; s < splits; s++) {
			mx = max(mx, sm[s].x);
		}
		var sum = 0.0;
		for (var s = 0u; s < splits; s++) {
			sum += sm[s].y * ggml_exp(sm[s].x - mx);
		}
		mlv = vec2<f32>(mx, 1.0 / sum);
	}
	workgroupBarrier();
	let ml = mlv;
	for (var sl = lid; sl < splits * span; sl += WG) {
		let c = sl / span;
		let r = sl % span;
		if (r < chunk && c * chunk + r < seq) {
			sc[sl] = f16_round(ggml_exp(sc[sl] - ml.x) * ml.y);
		}
	}
	workgroupBarrier();
	// Σ p·V: thread (slot lid / (D/8), dims 8w … 8w+7) takes split c0 +
	// slot of each round, its positions' V loaded eight at a time (the
	// adds stay in order); the splits' sums are added in order
	let slot = lid / (D / 8u);
	let w = lid % (D / 8u);
	var total: array<vec4<f32>, 2>;
	for (var c0 = 0u; c0 < splits; c0 += RP) {
		let c = c0 + slot;
		var acc: array<vec4<f32>, 2>;
		if (slot < RP && c < splits) {
			let t0 = c * chunk;
			let t1 = min(t0 + chunk, seq);
			let b = c * span - t0; // slot of position t is b + t
			var t = t0;
			for (; t + 8u <= t1; t += 8u) {
				var vs: array<vec4<u32>, 8>;
				for (var i = 0u; i < 8u; i++) {
					vs[i] = vword(g, t + i, w);
				}
				for (var i = 0u; i < 8u; i++) {
					pv(&acc, sc[b + t + i], vs[i]);
				}
			}
			for (; t < t1; t++) {
				pv(&acc, sc[b + t], vword(g, t, w));
			}
		}
		part[2u * lid] = acc[0];
		part[2u * lid + 1u] = acc[1];
		workgroupBarrier();
		if (lid < D / 8u) {
			for (var s = 0u; s < RP && c0 + s < splits; s++) {
				total[0] += part[2u * (s * (D / 8u) + lid)];
				total[1] += part[2u * (s * (D / 8u) + lid) + 1u];
			}
		}
		workgroupBarrier();
	}
	if (lid < D / 8u) {
		for (var e = 0u; e < 4u; e++) {
			outv[8u * lid + e] = total[0][e];
			outv[8u * lid + 4u + e] = total[1][e];
		}
	}
	workgroupBarrier();
	let val = select(0.0, outv[min(lid, D - 1u)], lid < D);
	if (lid < D) {
		dst[h * D + lid] = val;
	}
//#if Q8
	let r = q8_round(lid, val);
	if (lid < D) {
		xq[h * D + lid] = r.x;
		if (lid % 32u == 0u) {
			xsum[(h * D + lid) / 32u] = r.y;
		}
//#if TAB
		xtab[h * D + lid] = q8_entries(lid);
//#endif
	}
//#endif
}
