// The chunked delta rule (HybridOps.DeltaNet for long batches): the
// sequential recurrence regrouped per chunk of C tokens, with T, M and G
// from deltanet_prep.wgsl. For a chunk of L tokens and the state S₀ at its
// start (γ_t = e^{G_t}):
//	B_t = β_t(v_t − γ_t S₀ᵀk_t);  Δ = T·B
//	out_t = (γ_t S₀ᵀq_t + Σ_{s≤t} M[t][s] Δ_s)·SCALE
//	S_L = γ_L S₀ + Σ_{s<L} e^{G_L−G_s} k_s Δ_sᵀ
// which equals the token-by-token rule up to rounding. One workgroup per
// (block of JB state columns, value head) keeps its block of S in
// workgroup memory across the chunks; thread (t, jj) owns token t of the
// chunk for column jj, and rows t, t+C, … of the state update. State
// layout as deltanet.wgsl (transposed); zeros at position 0.
// Constants: C, JB, D, KHEADS, VHEADS, XROWS, NCH, SCALE.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> beta: array<f32>;
@group(0) @binding(5) var<storage, read> prep: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> dst: array<f32>;

const SHN: u32 = D * JB;
const WGN: u32 = C * JB;
const TMN: u32 = 2u * C * C + C;
var<workgroup> sh: array<f32, SHN>; // S[i][j0 + jj] at i·JB + jj
var<workgroup> bd: array<f32, WGN>; // B, then Δ
var<workgroup> tm: array<f32, TMN>;

@compute @workgroup_size(WGN)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let j0 = wid.x * JB;
	let h = wid.y;
	let n = min(batch.n, XROWS);
	let t = lid / JB;
	let jj = lid % JB;
	let j = j0 + jj;
	let kh = h % KHEADS;
	for (var e = lid; e < D * JB; e += C * JB) {
		let i = e / JB;
		let col = j0 + e % JB;
		var sv = 0.0;
		if (batch.pos != 0u && col < D) {
			sv = state[(h * D + col) * D + i];
		}
		sh[e] = sv;
	}
	let chunks = (n + C - 1u) / C;
	for (var c = 0u; c < chunks; c++) {
		let t0 = c * C;
		let len = min(C, n - t0);
		let base = (h * NCH + c) * (2u * C * C + C);
		for (var e = lid; e < 2u * C * C + C; e += C * JB) {
			tm[e] = prep[base + e];
		}
		workgroupBarrier();
		let gt = tm[2u * C * C + t];
		let tok = t0 + t;
		let live = t < len && j < D;
		var sq = 0.0;
		var bv = 0.0;
		if (live) {
			let kb = (tok * KHEADS + kh) * D;
			var sk = 0.0;
			for (var i = 0u; i < D; i++) {
				let sij = sh[i * JB + jj];
				sk += sij * k[kb + i];
				sq += sij * q[kb + i];
			}
			bv = beta[tok * VHEADS + h] * (v[(tok * VHEADS + h) * D + j] - exp(gt) * sk);
		}
		bd[lid] = bv;
		workgroupBarrier();
		var dv = 0.0;
		for (var s = 0u; s <= t; s++) {
			dv += tm[t * C + s] * bd[s * JB + jj];
		}
		workgroupBarrier();
		bd[lid] = select(0.0, dv, live);
		workgroupBarrier();
		if (live) {
			var o = exp(gt) * sq;
			for (var s = 0u; s <= t; s++) {
				o += tm[C * C + t * C + s] * bd[s * JB + jj];
			}
			dst[(tok * VHEADS + h) * D + j] = o * SCALE;
		}
		let gl = tm[2u * C * C + len - 1u];
		for (var i = t; i < D; i += C) {
			var sv = exp(gl) * sh[i * JB + jj];
			for (var s = 0u; s < len; s++) {
				sv += exp(gl - tm[2u * C * C + s]) * k[((t0 + s) * KHEADS + kh) * D + i] * bd[s * JB + jj];
			}
			sh[i * JB + jj] = sv;
		}
		workgroupBarrier();
	}
	for (var e = lid; e < D * JB; e += C * JB) {
		let col = j0 + e % JB;
		if (col < D) {
			state[(h * D + col) * D + e / JB] = sh[e];
		}
	}
}
