// Embedding lookup: row i of dst = row tokens[i] of the embedding matrix,
// dequantized. One thread per value. Q1 reads the repacked sign words and
// f32 scales; otherwise the matrix is f32.
// Constants: K (row length), VOCAB, XROWS (rows of dst); flag Q1.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
//#if Q1
@group(0) @binding(2) var<storage, read> bits: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read_write> dst: array<f32>;
//#else
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;
//#endif

//#if Q1
//#include q1_layout
//#endif

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let j = gid.x;
	let i = gid.y;
	if (j >= K || i >= min(batch.n, XROWS)) {
		return;
	}
	let tok = tokens[i];
	if (tok >= VOCAB) {
		dst[i * K + j] = 0.0;
		return;
	}
//#if Q1
	let word = bits[q1_word(tok, j / 32u)];
	let d = scales[q1_scale(tok, j / 128u)];
	dst[i * K + j] = select(-d, d, ((word >> (j % 32u)) & 1u) != 0u);
//#else
	dst[i * K + j] = w[tok * K + j];
//#endif
}
