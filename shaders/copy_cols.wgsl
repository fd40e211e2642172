// Column blocks of src into dst (HybridOps.CopyCols): for active row i and
// block h < COUNT, dst[i][DST0 + h·WIDTH + j] = src[i][SRC0 + h·STRIDE + j].
// Constants: SCOLS, DCOLS, SRC0, DST0, WIDTH, STRIDE, COUNT, XROWS.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let e = gid.x;
	let row = gid.y;
	if (e >= COUNT * WIDTH || row >= min(batch.n, XROWS)) {
		return;
	}
	let h = e / WIDTH;
	let j = e % WIDTH;
	dst[row * DCOLS + DST0 + e] = src[row * SCOLS + SRC0 + h * STRIDE + j];
}
