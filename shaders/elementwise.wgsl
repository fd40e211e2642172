// Element-wise ops over the active rows: SWIGLU (silu(a)·b), ADD (a+b) or
// COPY (b into dst, used with ALIAS_A).
// Aliasing variants bind dst once, read_write: ALIAS_A means dst is a,
// ALIAS_B means dst is b. Constants: COLS, XROWS; flags SWIGLU, ADD,
// ALIAS_A, ALIAS_B.
//#include cpu_math
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
//#if ALIAS_A
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
fn geta(i: u32) -> f32 { return dst[i]; }
fn getb(i: u32) -> f32 { return b[i]; }
//#endif
//#if ALIAS_B
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
fn geta(i: u32) -> f32 { return a[i]; }
fn getb(i: u32) -> f32 { return dst[i]; }
//#endif
//#if NOALIAS
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;
fn geta(i: u32) -> f32 { return a[i]; }
fn getb(i: u32) -> f32 { return b[i]; }
//#endif

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let j = gid.x;
	let row = gid.y;
	if (j >= COLS || row >= min(batch.n, XROWS)) {
		return;
	}
	let i = row * COLS + j;
	let x = geta(i);
	let y = getb(i);
//#if SWIGLU
	dst[i] = ggml_silu(x) * y;
//#endif
//#if ADD
	dst[i] = x + y;
//#endif
//#if COPY
	dst[i] = y;
//#endif
}
