// Attention, pass 2 of 3. Same workgroups and tiles as attn_stats. From
// all splits' (max, Σexp) it forms each head's softmax max M and sum L,
// rescores its positions, rounds the weights p = exp(s − M)/L to f16 as
// llama.cpp's CPU graph does before they meet V, and writes Σ p·V of its
// split. Thread (hq = lid / (D/4), dims 4·(lid % (D/4)) … +3) accumulates
// one vec4 of one head's output; QPG·D/4 must not exceed WG.
// Constants: as attn_stats.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
@group(0) @binding(3) var<storage, read> vc: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read> stats: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> part: array<vec4<f32>>;

const NEG: f32 = -3.0e38;
const QD: u32 = QPG * D;
const KT: u32 = TILE * (D / 2u + 1u);

var<workgroup> qs: array<f32, QD>;
var<workgroup> kt: array<u32, KT>;
var<workgroup> ps: array<f32, WG>;
var<workgroup> ml: array<vec2<f32>, QPG>;

fn f16round(v: f32) -> f32 {
	return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

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
		qs[i] = f16round(q[row * HEADS * D + g * QD + i]);
	}
	if (lid < QPG) {
		let first = (row * HEADS + g * QPG + lid) * batch.splits;
		var mx = NEG;
		for (var s = 0u; s < batch.splits; s++) {
			mx = max(mx, stats[first + s].x);
		}
		var sum = 0.0;
		for (var s = 0u; s < batch.splits; s++) {
			let st = stats[first + s];
			sum += st.y * exp(st.x - mx);
		}
		ml[lid] = vec2<f32>(mx, 1.0 / sum);
	}
	let hq = lid / TILE;
	let j = lid % TILE;
	let oh = lid / (D / 4u); // output head of this thread
	let od = (lid % (D / 4u)) * 4u;
	var acc = vec4<f32>(0.0);
	for (var tb = t0; tb < t1; tb += TILE) {
		workgroupBarrier();
		let cnt = min(TILE, t1 - tb);
		for (var i = lid; i < cnt * (D / 2u); i += WG) {
			let r = i / (D / 2u);
			let w = i % (D / 2u);
			kt[r * (D / 2u + 1u) + w] = kc[LAYER_OFF + (tb + r) * (KVD / 2u) + g * (D / 2u) + w];
		}
		workgroupBarrier();
		var p = 0.0;
		if (hq < QPG && j < cnt) {
			var dotv = 0.0;
			for (var w = 0u; w < D / 2u; w++) {
				let k2 = unpack2x16float(kt[j * (D / 2u + 1u) + w]);
				dotv += qs[hq * D + 2u * w] * k2.x + qs[hq * D + 2u * w + 1u] * k2.y;
			}
			let st = ml[hq];
			p = f16round(exp(dotv * SCALE - st.x) * st.y);
		}
		ps[lid] = p;
		workgroupBarrier();
		if (oh < QPG) {
			for (var i = 0u; i < cnt; i++) {
				let vw = vc[(LAYER_OFF + (tb + i) * (KVD / 2u) + g * (D / 2u) + od / 2u) / 2u];
				let v = vec4<f32>(unpack2x16float(vw.x), unpack2x16float(vw.y));
				acc += ps[oh * TILE + i] * v;
			}
		}
	}
	if (oh < QPG) {
		part[((row * HEADS + g * QPG + oh) * batch.splits + c) * (D / 4u) + od / 4u] = acc;
	}
}
