// A decode activation row and its Q8_0 rounding (q8_group) for q1_xq, by
// the op that produces it. NORM: dst = RMSNorm(x)·w over the whole row (x
// not dst), every workgroup summing x² in exactly rmsnorm.wgsl's order
// with its 256 threads (G = 256·k, k ≥ 2) so its scale is bit-identical;
// GLU: dst = silu(x)·up as elementwise.wgsl; with HNORM up is first
// RMSNorm'd in place per head of NG values (a power of two from 32 to
// WG: a workgroup holds whole heads), each head summed as rmsnorm.wgsl
// sums it with NG threads, one value each, so the normed up is the op
// sequence's bit for bit; GATE: dst = x·sigmoid(gate) as unary.wgsl's
// gate. One thread per value, 256 per workgroup; xq gets
// the rounded values, xsum each 32's Σ, xtab the row's lookup table
// (q8_tab) for q1_xq.
// Constants: G (row length), EPS, WG (=256), NG and HEPS (HNORM); flags
// NORM, GLU, HNORM, GATE, INPLACE (GLU or GATE with dst = x: x is read through dst's
// binding).
//#include cpu_math
//#include q8_tab
//#include q8_group
//#if INPLACE
//#else
@group(0) @binding(0) var<storage, read> x: array<f32>;
//#endif
//#if NORM
@group(0) @binding(1) var<storage, read> w: array<f32>;
//#endif
//#if GATE
@group(0) @binding(1) var<storage, read> gate: array<f32>;
//#endif
//#if GLU
//#if HNORM
@group(0) @binding(1) var<storage, read_write> up: array<f32>;
@group(0) @binding(6) var<storage, read> hw: array<f32>;
var<workgroup> hred: array<f32, WG>;
//#else
@group(0) @binding(1) var<storage, read> up: array<f32>;
//#endif
//#endif
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read_write> xq: array<f32>;
@group(0) @binding(4) var<storage, read_write> xsum: array<f32>;
@group(0) @binding(5) var<storage, read_write> xtab: array<vec4<f32>>;

//#if NORM
var<workgroup> red: array<f32, WG>;
//#endif

fn load(i: u32) -> f32 {
//#if INPLACE
	return dst[i];
//#else
	return x[i];
//#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let e = wid.x * WG + lid;
	let live = e < G;
	let i = min(e, G - 1u);
//#if NORM
	var ss = 0.0;
	for (var j = lid; j < G; j += WG) {
		let val = load(j);
		ss += val * val;
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
	let v = select(0.0, load(i) * scale * w[i], live);
//#endif
//#if GLU
//#if HNORM
	// the head's Σ up² as rmsnorm.wgsl's tree over NG threads; every
	// value is read before any is written back
	let u = select(0.0, up[i], live);
	hred[lid] = u * u;
	workgroupBarrier();
	for (var s = NG / 2u; s > 0u; s >>= 1u) {
		if (lid % NG < s) {
			hred[lid] += hred[lid + s];
		}
		workgroupBarrier();
	}
	let scale = 1.0 / sqrt(hred[lid / NG * NG] / f32(NG) + HEPS);
	let un = u * scale * hw[i % NG];
	if (live) {
		up[e] = un;
	}
	let v = select(0.0, ggml_silu(load(i)) * un, live);
//#else
	let v = select(0.0, ggml_silu(load(i)) * up[i], live);
//#endif
//#endif
//#if GATE
	let v = select(0.0, load(i) * (1.0 / (1.0 + exp(-gate[i]))), live);
//#endif
	let r = q8_round(lid, v);
	if (live) {
		dst[e] = v;
		xq[e] = r.x;
		if (lid % 32u == 0u) {
			xsum[e / 32u] = r.y;
		}
		xtab[e] = q8_entries(lid);
	}
}
