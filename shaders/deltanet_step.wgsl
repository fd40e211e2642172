// The gated delta rule for one decoding step (HybridOps.DeltaNet with one
// row), laid out for the memory system: deltanet.wgsl's thread per state
// column walks its column alone, and neighbouring threads' loads land D
// floats apart. Here LP threads share a column (L = D/4 of them live, each
// holding 4 rows as a vec4, so a column's D floats are one coalesced read),
// CPW = 256/LP columns per workgroup, and the column sums Σ_i S[i][j]·k_i
// and Σ_i S[i][j]·q_i are trees over the column's threads. The same
// arithmetic per element as deltanet.wgsl, summed in another order:
//	S = exp(g)·S;  δ_j = (v_j − Σ_i S[i][j] k_i)·β;  S[i][j] += k_i δ_j;
//	out_j = Σ_i S[i][j] q_i · SCALE
// State as llama.cpp keeps it: M[j·D + i] = S[i][j]; zero at position 0.
// Constants: D (a multiple of 4), KHEADS, VHEADS, SCALE (1/√D), L (=D/4), LP
// (L rounded up to a power of two), CPW (=256/LP). Flag PINGPONG: the
// state is read from prev, which keeps it (a chained pass may be taken
// back), and written to state.
// With RUN the op steps one sequence's row in a pass over rows of several
// sequences: batch is that sequence's (1 row, its position, the row in
// the pass), and the state its sequence's.
//#if RUN
struct Batch { n: u32, pos: u32, row0: u32, chunk: u32 }
fn row0() -> u32 { return batch.row0; }
//#else
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
fn row0() -> u32 { return 0u; }
//#endif
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> g: array<f32>;
@group(0) @binding(5) var<storage, read> beta: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> dst: array<f32>;
// SLAB: a pass over one row of each of several sequences, workgroup z a
// row; the states of every slot lie in state, slot s's from s·SSTRIDE
// (vec4s), and a row at position 0 starts from zero.
//#if SLAB
//#include rows
//#endif
//#if PINGPONG
@group(0) @binding(8) var<storage, read> prev: array<vec4<f32>>;
fn old(i: u32) -> vec4<f32> { return prev[i]; }
//#else
fn old(i: u32) -> vec4<f32> { return state[i]; }
//#endif

var<workgroup> red: array<f32, 256>;

// colsum is Σ over the column's LP threads of part (the sum lands in the
// column's first slot); every thread of the workgroup calls it.
fn colsum(lid: u32, lane: u32, part: f32) -> f32 {
	red[lid] = part;
	workgroupBarrier();
	for (var st = LP / 2u; st > 0u; st >>= 1u) {
		if (lane < st) {
			red[lid] += red[lid + st];
		}
		workgroupBarrier();
	}
	let sum = red[lid - lane];
	workgroupBarrier(); // red is reused
	return sum;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let col = lid / LP;
	let lane = lid % LP;
	let j = wid.x * CPW + col;
	let h = wid.y;
	let live = j < D && lane < L;
	let kh = h % KHEADS;
//#if SLAB
	let r = wid.z;
	if (r >= batch.n) {
		return;
	}
	let si = row_seq(r) * SSTRIDE + (h * D + min(j, D - 1u)) * L + min(lane, L - 1u);
	let start = row_pos(r) != 0u;
//#else
	let r = row0();
	let si = (h * D + min(j, D - 1u)) * L + min(lane, L - 1u);
	let start = batch.pos != 0u;
//#endif
	let ki = (r * KHEADS + kh) * L + min(lane, L - 1u);
	var s = vec4<f32>(0.0);
	if (live && start) {
		s = old(si);
	}
	let kv = k[ki];
	let qv = q[ki];
	s *= exp(g[r * VHEADS + h]);
	var part = 0.0;
	if (live) {
		part = s.x * kv.x + s.y * kv.y + s.z * kv.z + s.w * kv.w;
	}
	let sk = colsum(lid, lane, part);
	let vj = v[(r * VHEADS + h) * D + min(j, D - 1u)];
	let delta = (vj - sk) * beta[r * VHEADS + h];
	s += kv * delta;
	part = 0.0;
	if (live) {
		part = s.x * qv.x + s.y * qv.y + s.z * qv.z + s.w * qv.w;
	}
	let o = colsum(lid, lane, part);
	if (live) {
		state[si] = s;
		if (lane == 0u) {
			dst[(r * VHEADS + h) * D + j] = o * SCALE;
		}
	}
}
