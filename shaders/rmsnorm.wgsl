// RMSNorm over groups of G values of each row (G = row length for the
// token norm, head_dim for Qwen3's per-head Q/K norm), as ggml_rms_norm:
// mean of squares in f32, scale = 1/sqrt(mean + eps), then × weight.
// One workgroup per (group, row). Constants: COLS, G, EPS, WG, XROWS;
// flag INPLACE (dst is x: one read_write binding); flag Q8 (G = COLS, a
// multiple of 32): also the result's Q8_0 rounding, as q1_w1 rounds its
// x (xq: values q·d, xsum: each 32's Σ), for q1_xq; with TAB also its
// lookup table (q8_tab).
//#include cpu_math
//#include q8_tab
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> w: array<f32>;
//#if INPLACE
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
//#else
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;
//#endif
//#if Q8
@group(0) @binding(4) var<storage, read_write> xq: array<f32>;
@group(0) @binding(5) var<storage, read_write> xsum: array<f32>;
//#if TAB
@group(0) @binding(6) var<storage, read_write> xtab: array<vec4<f32>>;
//#endif
//#endif

var<workgroup> red: array<f32, WG>;

fn load(i: u32) -> f32 {
//#if INPLACE
	return dst[i];
//#else
	return x[i];
//#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row = wid.y;
	if (row >= min(batch.n, XROWS)) {
		return;
	}
	let base = row * COLS + wid.x * G;
	var ss = 0.0;
	for (var j = lid; j < G; j += WG) {
		let v = load(base + j);
		ss += v * v;
	}
	red[lid] = ss;
	workgroupBarrier();
	for (var s = WG / 2u; s > 0u; s >>= 1u) {
		if (lid < s) {
			red[lid] += red[lid + s];
		}
		workgroupBarrier();
	}
	let scale = 1.0 / sqrt(red[0] / f32(G) + EPS);
//#if Q8
	// thread t takes the groups of 32 t, t+WG, …: all loads of this
	// workgroup precede its stores (the barrier above), so in place is safe
	workgroupBarrier();
	for (var gi = lid; gi < G / 32u; gi += WG) {
		var v: array<vec4<f32>, 8>;
		var a = vec4<f32>(0.0);
		for (var j = 0u; j < 8u; j++) {
			let i = gi * 32u + 4u * j;
			v[j] = vec4<f32>(load(base + i), load(base + i + 1u), load(base + i + 2u), load(base + i + 3u)) * scale *
				vec4<f32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]);
			a = max(a, abs(v[j]));
		}
		let amax = max(max(a.x, a.y), max(a.z, a.w));
		let dx = f16_round(div_rn(amax, 127.0));
		let id = select(0.0, div_rn(127.0, amax), amax != 0.0);
		var sum = vec4<f32>(0.0);
		for (var j = 0u; j < 8u; j++) {
			let i = base + gi * 32u + 4u * j;
			let q = round(v[j] * id) * dx;
			dst[i] = v[j].x;
			dst[i + 1u] = v[j].y;
			dst[i + 2u] = v[j].z;
			dst[i + 3u] = v[j].w;
			xq[i] = q.x;
			xq[i + 1u] = q.y;
			xq[i + 2u] = q.z;
			xq[i + 3u] = q.w;
			sum += q;
//#if TAB
			for (var c = 0u; c < 4u; c++) {
				xtab[i + c] = q8_tab(q, c);
			}
//#endif
		}
		xsum[base / 32u + gi] = (sum.x + sum.y) + (sum.z + sum.w);
	}
//#else
	for (var j = lid; j < G; j += WG) {
		dst[base + j] = load(base + j) * scale * w[j];
	}
//#endif
}
