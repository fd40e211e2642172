// Block Walsh–Hadamard rotation of each row (HybridOps.Hadamard): one
// workgroup per (block of B values, row) runs the log2(B) butterfly stages
// in workgroup memory (natural Sylvester order), then scales by 1/√B.
// SIGNS_BEFORE multiplies by s before the transform (after the REGROUP
// head permutation), SIGNS_AFTER after it. REGROUP reads output head
// k·REP + r from input head r·KH + k (heads of HD values). INPLACE: dst is
// x (not with REGROUP, whose reads cross blocks).
// Constants: COLS, B, WG, XROWS, SCALE, HD, KH, REP; flags SIGNS (bind
// s), SIGNS_BEFORE or SIGNS_AFTER, REGROUP, INPLACE.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
//#if INPLACE
fn load(i: u32) -> f32 { return dst[i]; }
//#else
@group(0) @binding(1) var<storage, read> x: array<f32>;
fn load(i: u32) -> f32 { return x[i]; }
//#endif
//#if SIGNS
@group(0) @binding(2) var<storage, read> signs: array<f32>;
//#endif
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

var<workgroup> buf: array<f32, B>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row = wid.y;
	if (row >= min(batch.n, XROWS)) {
		return;
	}
	let c0 = wid.x * B;
	for (var p = lid; p < B; p += WG) {
		let col = c0 + p;
		var src = col;
//#if REGROUP
		let o = col / HD;
		src = ((o % REP) * KH + o / REP) * HD + col % HD;
//#endif
		var val = load(row * COLS + src);
//#if SIGNS_BEFORE
		val *= signs[col];
//#endif
		buf[p] = val;
	}
	workgroupBarrier();
	for (var hs = 1u; hs < B; hs <<= 1u) {
		for (var t = lid; t < B / 2u; t += WG) {
			let i = (t / hs) * 2u * hs + t % hs;
			let a = buf[i];
			let b = buf[i + hs];
			buf[i] = a + b;
			buf[i + hs] = a - b;
		}
		workgroupBarrier();
	}
	for (var p = lid; p < B; p += WG) {
		let col = c0 + p;
		var val = buf[p] * SCALE;
//#if SIGNS_AFTER
		val *= signs[col];
//#endif
		dst[row * COLS + col] = val;
	}
}
