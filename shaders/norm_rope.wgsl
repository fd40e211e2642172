// Per-head RMSNorm (Qwen3's q/k norm) and NEOX RoPE in one pass, in place:
// the forward pass's RMSNorm(q, q, q_norm) then Rope(q) as one dispatch.
// Workgroup (head, row); same arithmetic as rmsnorm then rope.
// Constants: COLS, HEAD_DIM, DIMS, EPS, WG, XROWS, CTX.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;
//#include rows

var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row = wid.y;
	if (row >= min(batch.n, XROWS)) {
		return;
	}
	let base = row * COLS + wid.x * HEAD_DIM;
	var ss = 0.0;
	for (var j = lid; j < HEAD_DIM; j += WG) {
		let v = x[base + j];
		ss += v * v;
	}
	red[lid] = ss;
	workgroupBarrier();
	for (var s = WG / 2u; s > 0u; s >>= 1u) {
		if (lid < s) {
			red[lid] += red[lid + s];
		}
		workgroupBarrier();
	}
	let scale = 1.0 / sqrt(red[0] / f32(HEAD_DIM) + EPS);
	let pos = row_pos(row);
	let half = DIMS / 2u;
	for (var j = lid; j < half; j += WG) {
		let a = x[base + j] * scale * w[j];
		let b = x[base + j + half] * scale * w[j + half];
		if (pos < CTX) {
			let cs = table[pos * half + j];
			x[base + j] = a * cs.x - b * cs.y;
			x[base + j + half] = a * cs.y + b * cs.x;
		} else {
			x[base + j] = a;
			x[base + j + half] = b;
		}
	}
	for (var j = DIMS + lid; j < HEAD_DIM; j += WG) {
		x[base + j] = x[base + j] * scale * w[j];
	}
}
