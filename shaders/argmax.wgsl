// Index of the largest value of each active row (first on ties, as
// llama.cpp's greedy sampler). One workgroup of 256 per row.
// Constants: COLS, XROWS.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

var<workgroup> vals: array<f32, 256>;
var<workgroup> idxs: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row = wid.x;
	if (row >= min(batch.n, XROWS)) {
		return;
	}
	var best = -3.4e38;
	var bi = 0xffffffffu;
	for (var j = lid; j < COLS; j += 256u) {
		let v = x[row * COLS + j];
		if (v > best || bi == 0xffffffffu) {
			best = v;
			bi = j;
		}
	}
	vals[lid] = best;
	idxs[lid] = bi;
	workgroupBarrier();
	for (var s = 128u; s > 0u; s >>= 1u) {
		if (lid < s) {
			let v = vals[lid + s];
			let i = idxs[lid + s];
			if (i != 0xffffffffu && (idxs[lid] == 0xffffffffu || v > vals[lid] || (v == vals[lid] && i < idxs[lid]))) {
				vals[lid] = v;
				idxs[lid] = i;
			}
		}
		workgroupBarrier();
	}
	if (lid == 0u) {
		dst[row] = idxs[0];
	}
}
