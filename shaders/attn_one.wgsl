// Attention in one dispatch, for decode over a short context: attn_stats
// then attn_pv over the whole sequence in one workgroup per (kv head, row),
// writing dst directly. It is the three-pass kernel with a single split
// (the max and Σexp of the one split are the global ones, and attn_sum of
// one split is the identity), so the numerics are those of the split-KV
// path run with splits = 1: q rounded to f16, K/V from the f16 cache,
// softmax weights exp(s − M)/L rounded to f16 before they meet V. Two
// dispatches fewer per layer; the host picks it while the sequence is
// short enough that one workgroup per kv head beats the parallel passes.
// Constants: as attn_stats.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
@group(0) @binding(3) var<storage, read> vc: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> dst: array<vec4<f32>>;

const NEG: f32 = -3.0e38;
const QD: u32 = QPG * D;
const KT: u32 = TILE * (D / 2u + 1u);

var<workgroup> qs: array<f32, QD>;
var<workgroup> kt: array<u32, KT>; // K tile, rows padded by one word against bank conflicts
var<workgroup> red: array<f32, WG>;
var<workgroup> ml: array<vec2<f32>, QPG>;

fn f16round(v: f32) -> f32 {
	return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

// load_tile stages K rows tb … tb+cnt−1 of kv head g.
fn load_tile(lid: u32, g: u32, tb: u32, cnt: u32) {
	for (var i = lid; i < cnt * (D / 2u); i += WG) {
		let r = i / (D / 2u);
		let w = i % (D / 2u);
		kt[r * (D / 2u + 1u) + w] = kc[LAYER_OFF + (tb + r) * (KVD / 2u) + g * (D / 2u) + w];
	}
}

// score is q_hq · k_j of the staged tile (unscaled).
fn score(hq: u32, j: u32) -> f32 {
	var acc = 0.0;
	for (var w = 0u; w < D / 2u; w++) {
		let k2 = unpack2x16float(kt[j * (D / 2u + 1u) + w]);
		acc += qs[hq * D + 2u * w] * k2.x + qs[hq * D + 2u * w + 1u] * k2.y;
	}
	return acc;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let g = wid.x;
	let row = wid.y;
	if (row >= min(batch.n, QROWS)) {
		return;
	}
	let seq = batch.pos + row + 1u;
	for (var i = lid; i < QD; i += WG) {
		qs[i] = f16round(q[row * HEADS * D + g * QD + i]);
	}
	let hq = lid / TILE;
	let j = lid % TILE;
	// pass 1 (attn_stats): running max and Σexp per head
	var m = NEG;
	var l = 0.0;
	for (var tb = 0u; tb < seq; tb += TILE) {
		workgroupBarrier();
		let cnt = min(TILE, seq - tb);
		load_tile(lid, g, tb, cnt);
		workgroupBarrier();
		var s = NEG;
		if (hq < QPG && j < cnt) {
			s = score(hq, j) * SCALE;
		}
		red[lid] = s;
		workgroupBarrier();
		for (var st = TILE / 2u; st > 0u; st >>= 1u) {
			if (j < st) {
				red[lid] = max(red[lid], red[lid + st]);
			}
			workgroupBarrier();
		}
		let mt = max(m, red[hq * TILE]);
		workgroupBarrier();
		red[lid] = select(0.0, exp(s - mt), hq < QPG && j < cnt);
		workgroupBarrier();
		for (var st = TILE / 2u; st > 0u; st >>= 1u) {
			if (j < st) {
				red[lid] += red[lid + st];
			}
			workgroupBarrier();
		}
		l = l * exp(m - mt) + red[hq * TILE];
		m = mt;
	}
	// attn_pv's combination of one split: max m, sum l·exp(m − m) = l
	if (hq < QPG && j == 0u) {
		ml[hq] = vec2<f32>(m, 1.0 / (l * exp(m - m)));
	}
	// pass 2 (attn_pv): f16-rounded softmax weights · V
	let oh = lid / (D / 4u);
	let od = (lid % (D / 4u)) * 4u;
	var acc = vec4<f32>(0.0);
	for (var tb = 0u; tb < seq; tb += TILE) {
		workgroupBarrier();
		let cnt = min(TILE, seq - tb);
		load_tile(lid, g, tb, cnt);
		workgroupBarrier();
		var p = 0.0;
		if (hq < QPG && j < cnt) {
			let st = ml[hq];
			p = f16round(exp(score(hq, j) * SCALE - st.x) * st.y);
		}
		red[lid] = p;
		workgroupBarrier();
		if (oh < QPG) {
			for (var i = 0u; i < cnt; i++) {
				let vw = vc[(LAYER_OFF + (tb + i) * (KVD / 2u) + g * (D / 2u) + od / 2u) / 2u];
				let v = vec4<f32>(unpack2x16float(vw.x), unpack2x16float(vw.y));
				acc += red[oh * TILE + i] * v;
			}
		}
	}
	if (oh < QPG) {
		dst[(row * HEADS * D + (g * QPG + oh) * D + od) / 4u] = acc;
	}
}
