// Attention, pass 3 of 3: the weights of every split are already the final
// softmax (normalised by the global max and sum), so the output is the
// plain sum of the splits' Σ p·V. One thread per output value.
// Constants: HEADS, D, QROWS.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let i = gid.x; // head·D + d
	let row = gid.y;
	if (i >= HEADS * D || row >= min(batch.n, QROWS)) {
		return;
	}
	let h = i / D;
	let d = i % D;
	var a = 0.0;
	for (var c = 0u; c < batch.splits; c++) {
		a += part[((row * HEADS + h) * batch.splits + c) * D + d];
	}
	dst[row * HEADS * D + i] = a;
}
