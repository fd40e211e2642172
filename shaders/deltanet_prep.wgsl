// The parallel half of the chunked delta rule (deltanet_chunk.wgsl): for
// each value head h and chunk of C tokens, everything that does not depend
// on the state. With G_t = Σ_{u≤t} g_u over the chunk (γ_t = e^{G_t}):
//	A[t][s] = β_t·e^{G_t−G_s}·(k_t·k_s)   (s < t)
//	T = (I + A)⁻¹                          (unit lower triangular)
//	M[t][s] = e^{G_t−G_s}·(q_t·k_s)       (s ≤ t)
// so that the chunk's deltas are Δ = T·B with B_t = β_t(v_t − γ_t S₀ᵀk_t).
// One workgroup of C×C threads (t, s) per (chunk, head); T by forward
// substitution, one row per step. Output per (head, chunk), at
// (h·NCH + c)·(2C² + C): T (C×C), M (C×C), G (C); rows past the batch are
// those of I, 0 and 0.
// Constants: C, D, KHEADS, VHEADS, XROWS, NCH.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read> beta: array<f32>;
@group(0) @binding(5) var<storage, read_write> prep: array<f32>;

const CC: u32 = C * C;
var<workgroup> gs: array<f32, C>;
var<workgroup> a: array<f32, CC>;
var<workgroup> x: array<f32, CC>;

@compute @workgroup_size(CC)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let c = wid.x;
	let h = wid.y;
	let n = min(batch.n, XROWS);
	let t0 = c * C;
	let len = min(C, n - min(n, t0));
	let t = lid / C;
	let s = lid % C;
	let kh = h % KHEADS;
	if (lid == 0u) {
		var acc = 0.0;
		for (var u = 0u; u < C; u++) {
			if (u < len) {
				acc += g[(t0 + u) * VHEADS + h];
			}
			gs[u] = acc;
		}
	}
	workgroupBarrier();
	var kk = 0.0;
	var qk = 0.0;
	if (t < len && s <= t) {
		let kt = ((t0 + t) * KHEADS + kh) * D;
		let ks = ((t0 + s) * KHEADS + kh) * D;
		for (var i = 0u; i < D; i++) {
			kk += k[kt + i] * k[ks + i];
			qk += q[kt + i] * k[ks + i];
		}
	}
	let ratio = exp(gs[t] - gs[s]);
	let base = (h * NCH + c) * (2u * C * C + C);
	var av = 0.0;
	var mv = 0.0;
	if (t < len && s <= t) {
		mv = ratio * qk;
		if (s < t) {
			av = beta[(t0 + t) * VHEADS + h] * ratio * kk;
		}
	}
	a[lid] = av;
	x[lid] = select(0.0, 1.0, t == s);
	prep[base + C * C + lid] = mv;
	if (lid < C) {
		prep[base + 2u * C * C + lid] = select(0.0, gs[lid], lid < len);
	}
	workgroupBarrier();
	// row r of X: X[r][s] = δ_rs − Σ_{s≤u<r} A[r][u]·X[u][s]
	for (var r = 1u; r < C; r++) {
		if (t == r && s < r) {
			var acc = 0.0;
			for (var u = s; u < r; u++) {
				acc += a[r * C + u] * x[u * C + s];
			}
			x[lid] = -acc;
		}
		workgroupBarrier();
	}
	prep[base + lid] = x[lid];
}
