// Depthwise causal convolution with state (HybridOps.CausalConv, ggml's
// ssm_conv): one thread per channel walks the batch's rows in order with
// the last W inputs in registers, so the state (W−1 rows of CH values,
// oldest first) is read once and written once. A pass at position 0 starts
// from zeros. dst may be x (ALIAS: x read through dst, each value before
// it is overwritten). With PINGPONG the state is read from prev and
// written to state, so prev keeps the state one step back (a chained
// decoding pass, which may be taken back).
// Constants: CH, W, XROWS; flags ALIAS, PINGPONG.
// With RUN the op steps one sequence's run of rows in a pass over rows of
// several sequences: batch is that run's (its row count, its first row's
// position, that row in the pass), and the state its sequence's.
//#if RUN
struct Batch { n: u32, pos: u32, row0: u32, chunk: u32 }
fn row0() -> u32 { return batch.row0; }
//#else
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
fn row0() -> u32 { return 0u; }
//#endif
@group(0) @binding(0) var<uniform> batch: Batch;
//#if ALIAS
fn getx(i: u32) -> f32 { return dst[i]; }
//#else
@group(0) @binding(1) var<storage, read> x: array<f32>;
fn getx(i: u32) -> f32 { return x[i]; }
//#endif
@group(0) @binding(2) var<storage, read> w: array<f32>; // [c][t]
@group(0) @binding(3) var<storage, read_write> state: array<f32>;
@group(0) @binding(4) var<storage, read_write> dst: array<f32>;
//#if PINGPONG
@group(0) @binding(5) var<storage, read> prev: array<f32>;
fn old(i: u32) -> f32 { return prev[i]; }
//#else
fn old(i: u32) -> f32 { return state[i]; }
//#endif

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let c = gid.x;
	if (c >= CH) {
		return;
	}
	let n = min(batch.n, XROWS - row0());
	var win: array<f32, W>;
	var wt: array<f32, W>;
	for (var t = 0u; t < W; t++) {
		wt[t] = w[c * W + t];
		win[t] = 0.0;
	}
	if (batch.pos != 0u) {
		for (var t = 0u; t + 1u < W; t++) {
			win[t] = old(t * CH + c);
		}
	}
	for (var i = row0(); i < row0() + n; i++) {
		win[W - 1u] = getx(i * CH + c);
		var acc = 0.0;
		for (var t = 0u; t < W; t++) {
			acc += wt[t] * win[t];
		}
		dst[i * CH + c] = acc;
		for (var t = 0u; t + 1u < W; t++) {
			win[t] = win[t + 1u];
		}
	}
	for (var t = 0u; t + 1u < W; t++) {
		state[t * CH + c] = win[t];
	}
}
