// The gated delta rule over the batch's rows in order (HybridOps.DeltaNet),
// as ggml_gated_delta_net: one thread per column j of one value head's
// state, which it keeps in registers for the whole batch. The state is kept
// as llama.cpp keeps it, transposed: M[j·D + i] = S[i][j], so column j is
// contiguous. Per token, with k and q of key head h mod KHEADS:
//	S = exp(g)·S;  δ_j = (v_j − Σ_i S[i][j] k_i)·β;  S[i][j] += k_i δ_j;
//	out_j = Σ_i S[i][j] q_i · SCALE
// A pass at position 0 starts from a zero state.
// Constants: D, KHEADS, VHEADS, XROWS, SCALE (1/√D), WG.
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
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> g: array<f32>;
@group(0) @binding(5) var<storage, read> beta: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> dst: array<f32>;
// PINGPONG: the state is read from prev, which keeps it (a chained pass
// may be taken back), and written to state.
//#if PINGPONG
@group(0) @binding(8) var<storage, read> prev: array<f32>;
fn old(i: u32) -> f32 { return prev[i]; }
//#else
fn old(i: u32) -> f32 { return state[i]; }
//#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let j = wid.x * WG + lid;
	let h = wid.y;
	if (j >= D) {
		return;
	}
	let kh = h % KHEADS;
	let n = min(batch.n, XROWS - row0());
	let sbase = (h * D + j) * D;
	var s: array<f32, D>;
	for (var i = 0u; i < D; i++) {
		s[i] = 0.0;
	}
	if (batch.pos != 0u) {
		for (var i = 0u; i < D; i++) {
			s[i] = old(sbase + i);
		}
	}
	for (var t = row0(); t < row0() + n; t++) {
		let decay = exp(g[t * VHEADS + h]);
		let bt = beta[t * VHEADS + h];
		let kb = (t * KHEADS + kh) * D;
		let vi = (t * VHEADS + h) * D + j;
		var sk = 0.0;
		for (var i = 0u; i < D; i++) {
			s[i] *= decay;
			sk += s[i] * k[kb + i];
		}
		let delta = (v[vi] - sk) * bt;
		var o = 0.0;
		for (var i = 0u; i < D; i++) {
			s[i] += k[kb + i] * delta;
			o += s[i] * q[kb + i];
		}
		dst[vi] = o * SCALE;
	}
	for (var i = 0u; i < D; i++) {
		state[sbase + i] = s[i];
	}
}
