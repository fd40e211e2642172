// RoPE in place: pairs (j, j + DIMS/2) of each head (NEOX), or (2j, 2j+1)
// with NORMAL, rotated by the angle table cos/sin[pos][j] (built on the CPU
// from infer.Rope.Angles, YaRN, magnitude scale and frequency factors
// included). One thread per (head, pair).
// Constants: COLS, HEAD_DIM, DIMS, XROWS, CTX; flag NORMAL.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
//#include rows

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let half = DIMS / 2u;
	let heads = COLS / HEAD_DIM;
	let row = gid.y;
	if (gid.x >= heads * half || row >= min(batch.n, XROWS)) {
		return;
	}
	let pos = row_pos(row);
	if (pos >= CTX) {
		return;
	}
	let h = gid.x / half;
	let j = gid.x % half;
	let cs = table[pos * half + j];
//#if NORMAL
	let i0 = row * COLS + h * HEAD_DIM + 2u * j;
	let i1 = i0 + 1u;
//#else
	let i0 = row * COLS + h * HEAD_DIM + j;
	let i1 = i0 + half;
//#endif
	let a = x[i0];
	let b = x[i1];
	x[i0] = a * cs.x - b * cs.y;
	x[i1] = a * cs.y + b * cs.x;
}
