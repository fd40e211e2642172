// Copies the batch's last active row of src into row 0 of dst.
// Constants: COLS, SROWS (rows of src).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let j = gid.x;
	if (j >= COLS) {
		return;
	}
	let last = min(batch.n, SROWS) - 1u;
	dst[j] = src[last * COLS + j];
}
