// Split-KV attention, pass 2: combines the splits' (max, sum, Σ exp·V) of
// each (head, row) into softmax-weighted values. One workgroup per
// (head, row), threads over dims. Constants: HEADS, D, QROWS.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let h = wid.x;
	let row = wid.y;
	if (row >= min(batch.n, QROWS)) {
		return;
	}
	let first = (row * HEADS + h) * batch.splits;
	var mx = -3.0e38;
	for (var c = 0u; c < batch.splits; c++) {
		mx = max(mx, part[(first + c) * (D + 2u)]);
	}
	var l = 0.0;
	for (var c = 0u; c < batch.splits; c++) {
		let b = (first + c) * (D + 2u);
		l += part[b + 1u] * exp(part[b] - mx);
	}
	for (var d = lid; d < D; d += 64u) {
		var a = 0.0;
		for (var c = 0u; c < batch.splits; c++) {
			let b = (first + c) * (D + 2u);
			a += part[b + 2u + d] * exp(part[b] - mx);
		}
		dst[row * HEADS * D + h * D + d] = a / l;
	}
}
