// Attention, pass 1 of 3 (split-KV, GQA-aware). Workgroup (kv head g, row,
// split c) serves the QPG query heads sharing g, so each K row is read once
// for all of them. It scores positions [c·chunk, min((c+1)·chunk, pos+row+1))
// in tiles of TILE (thread hq·TILE + j scores head hq at tile position j)
// and writes each head's running max and Σexp for the split.
// The numerics follow llama.cpp's CPU graph (and infer/cpu): q rounded to
// f16, K from the f16 cache, s = scale·Σ q·k in f32.
// Constants: HEADS, KVHEADS, QPG (=HEADS/KVHEADS), D, KVD, QROWS, LAYER_OFF,
// SCALE, TILE (=WG/QPG, a power of two), WG.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
@group(0) @binding(3) var<storage, read_write> stats: array<vec2<f32>>;

const NEG: f32 = -3.0e38;
const QD: u32 = QPG * D;
const KT: u32 = TILE * (D / 2u + 1u);

var<workgroup> qs: array<f32, QD>;
var<workgroup> kt: array<u32, KT>; // K tile, rows padded by one word against bank conflicts
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let g = wid.x;
	let row = wid.y;
	let c = wid.z;
	if (row >= min(batch.n, QROWS) || c >= batch.splits) {
		return;
	}
	let seq = batch.pos + row + 1u;
	let t0 = min(c * batch.chunk, seq);
	let t1 = min(t0 + batch.chunk, seq);
	for (var i = lid; i < QD; i += WG) {
		let v = q[row * HEADS * D + g * QD + i];
		qs[i] = unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
	}
	let hq = lid / TILE;
	let j = lid % TILE;
	var m = NEG;
	var l = 0.0;
	for (var tb = t0; tb < t1; tb += TILE) {
		workgroupBarrier();
		let cnt = min(TILE, t1 - tb);
		for (var i = lid; i < cnt * (D / 2u); i += WG) {
			let r = i / (D / 2u);
			let w = i % (D / 2u);
			kt[r * (D / 2u + 1u) + w] = kc[LAYER_OFF + (tb + r) * (KVD / 2u) + g * (D / 2u) + w];
		}
		workgroupBarrier();
		var s = NEG;
		if (hq < QPG && j < cnt) {
			var acc = 0.0;
			for (var w = 0u; w < D / 2u; w++) {
				let k2 = unpack2x16float(kt[j * (D / 2u + 1u) + w]);
				acc += qs[hq * D + 2u * w] * k2.x + qs[hq * D + 2u * w + 1u] * k2.y;
			}
			s = acc * SCALE;
		}
		// tile max and Σexp per head: tree over the TILE threads of a head
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
	if (hq < QPG && j == 0u) {
		stats[(row * HEADS + g * QPG + hq) * batch.splits + c] = vec2<f32>(m, l);
	}
}
