// Attention in one dispatch, for decode over a short context: attn_stats
// then attn_pv over the whole sequence in one workgroup per (kv head, row),
// writing dst directly. It is the three-pass kernel with a single split
// (the max and Σexp of the one split are the global ones, and attn_sum of
// one split is the identity), so the numerics are those of the split-KV
// path run with splits = 1: q rounded to f16, K/V from the f16 cache,
// softmax weights exp(s − M)/L rounded to f16 before they meet V. Two
// dispatches fewer per layer; the host picks it while the sequence is
// short enough that one workgroup per kv head beats the parallel passes.
// Constants: as attn_stats (RT 1).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
//#if VQ8
@group(0) @binding(3) var<storage, read> vc: array<u32>;
//#else
@group(0) @binding(3) var<storage, read> vc: array<vec2<u32>>;
//#endif
@group(0) @binding(4) var<storage, read_write> dst: array<vec4<f32>>;

//#include cpu_math
//#if KVQ
//#include kv_q8
//#endif
//#include attn_blk
//#include attn_blk_pv

// the workgroup's row and kv head, for put_out
var<private> prow: u32;
var<private> pg: u32;

fn kword4(t: u32, g: u32, i: u32) -> vec4<u32> {
	let o = LAYER_OFF + t * (KVD / 2u) + g * (D / 2u) + 4u * i;
	return vec4<u32>(kc[o], kc[o + 1u], kc[o + 2u], kc[o + 3u]);
}

fn vword(t: u32, g: u32, d4: u32) -> vec4<f32> {
//#if VQ8
	return i8x4(vc[q8_qi(t, g, d4)]) * q8_scale(vc[q8_si(t, g, d4 / 8u)], d4 / 8u);
//#else
	let w = vc[(LAYER_OFF + t * (KVD / 2u) + g * (D / 2u)) / 2u + d4];
	return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
//#endif
}

//#if VROTATE
// a Q8_0 V's output, rotated back (VROT, VRS) before it goes to dst
const OBN: u32 = QPG * D4;
var<workgroup> ob: array<vec4<f32>, OBN>;

fn put_out(h: u32, d4: u32, o: vec4<f32>) {
	ob[h * D4 + d4] = o;
}
//#else
fn put_out(h: u32, d4: u32, o: vec4<f32>) {
	dst[(prow * HEADS + pg * QPG + h) * D4 + d4] = o;
}
//#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let g = wid.x;
	let row = wid.y;
	if (row >= min(batch.n, QROWS)) {
		return;
	}
	prow = row;
	pg = g;
	let seq = batch.pos + row + 1u;
	load_q(lid, row, row + 1u, g);
	// pass 1 (attn_stats) over the whole sequence (its window's)
	let t0 = win_lo(seq);
	blk_stats(lid, g, t0, seq, seq);
	// attn_pv's combination of one split: max m, sum l·exp(m − m) = l
	if (lid == 0u) {
		for (var h = 0u; h < QPG; h++) {
			let st = ml[h];
			ml[h] = vec2<f32>(st.x, 1.0 / (st.y * ggml_exp(st.x - st.x)));
		}
	}
	workgroupBarrier();
	// pass 2 (attn_pv)
	blk_pv(lid, g, t0, seq, seq);
//#if VROTATE
	workgroupBarrier();
	for (var h = 1u; h < VROT; h <<= 1u) {
		for (var i = lid; i < QPG * D / 2u; i += WG) {
			let j = i / h * 2u * h + i % h;
			let a = ob[j / 4u][j % 4u];
			let b = ob[(j + h) / 4u][(j + h) % 4u];
			ob[j / 4u][j % 4u] = a + b;
			ob[(j + h) / 4u][(j + h) % 4u] = a - b;
		}
		workgroupBarrier();
	}
	for (var i = lid; i < QPG * D4; i += WG) {
		dst[(row * HEADS + g * QPG) * D4 + i] = ob[i] * VRS;
	}
//#endif
}
