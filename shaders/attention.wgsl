// Split-KV decode/prefill attention ("flash decoding"), pass 1 of 2.
// Workgroup (head h, row i, split c) scores the positions
// [c·chunk, min((c+1)·chunk, pos+i+1)) of kv head g = h/(HEADS/KVHEADS)
// against q, with an online softmax over tiles of WG positions, and writes
// (max, sum of exp, Σ exp·V) to part; attn_reduce combines the splits.
// K/V come from the f16 cache (two values per u32).
// Constants: HEADS, KVHEADS, D, KVD (= KVHEADS·D), QROWS, LAYER_OFF, SCALE,
// WG, DPT (= ceil(D/WG)).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
@group(0) @binding(3) var<storage, read> vc: array<u32>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;

const NEG: f32 = -3.0e38;

var<workgroup> qs: array<f32, D>;
var<workgroup> sc: array<f32, WG>;
var<workgroup> red: array<f32, WG>;

fn reduce_max(lid: u32, v: f32) -> f32 {
	red[lid] = v;
	workgroupBarrier();
	for (var s = WG / 2u; s > 0u; s >>= 1u) {
		if (lid < s) {
			red[lid] = max(red[lid], red[lid + s]);
		}
		workgroupBarrier();
	}
	let r = red[0];
	workgroupBarrier();
	return r;
}

fn reduce_sum(lid: u32, v: f32) -> f32 {
	red[lid] = v;
	workgroupBarrier();
	for (var s = WG / 2u; s > 0u; s >>= 1u) {
		if (lid < s) {
			red[lid] += red[lid + s];
		}
		workgroupBarrier();
	}
	let r = red[0];
	workgroupBarrier();
	return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let h = wid.x;
	let row = wid.y;
	let c = wid.z;
	if (row >= min(batch.n, QROWS) || c >= batch.splits) {
		return;
	}
	let seq = batch.pos + row + 1u;
	let t0 = min(c * batch.chunk, seq);
	let t1 = min(t0 + batch.chunk, seq);
	let g = h / (HEADS / KVHEADS);
	let kvoff = LAYER_OFF + g * (D / 2u);
	for (var j = lid; j < D; j += WG) {
		qs[j] = q[row * HEADS * D + h * D + j];
	}
	workgroupBarrier();

	var m = NEG;
	var l = 0.0;
	var acc: array<f32, DPT>;
	for (var i = 0u; i < DPT; i++) {
		acc[i] = 0.0;
	}
	for (var tb = t0; tb < t1; tb += WG) {
		let t = tb + lid;
		var s = NEG;
		if (t < t1) {
			let kb = kvoff + t * (KVD / 2u);
			var dotv = 0.0;
			for (var i = 0u; i < D / 2u; i++) {
				let kk = unpack2x16float(kc[kb + i]);
				dotv += kk.x * qs[2u * i] + kk.y * qs[2u * i + 1u];
			}
			s = dotv * SCALE;
		}
		let mnew = max(m, reduce_max(lid, s));
		let e = select(0.0, exp(s - mnew), t < t1);
		sc[lid] = e;
		let corr = exp(m - mnew);
		l = l * corr + reduce_sum(lid, e);
		let cnt = min(WG, t1 - tb);
		for (var i = 0u; i < DPT; i++) {
			let d = lid + i * WG;
			if (d < D) {
				var a = acc[i] * corr;
				let vb = kvoff + tb * (KVD / 2u) + d / 2u;
				for (var j = 0u; j < cnt; j++) {
					let vv = unpack2x16float(vc[vb + j * (KVD / 2u)]);
					a += sc[j] * select(vv.x, vv.y, (d & 1u) == 1u);
				}
				acc[i] = a;
			}
		}
		m = mnew;
		workgroupBarrier();
	}
	let base = ((row * HEADS + h) * batch.splits + c) * (D + 2u);
	if (lid == 0u) {
		part[base] = m;
		part[base + 1u] = l;
	}
	for (var i = 0u; i < DPT; i++) {
		let d = lid + i * WG;
		if (d < D) {
			part[base + 2u + d] = acc[i];
		}
	}
}
