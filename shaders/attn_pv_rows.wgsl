// Prompt-pass attention, pass 2 of 3. Same workgroups and tiles as
// attn_stats_rows. On the H100 these tiles took a 512-token prompt at depth
// 4096 at 1,152 tok/s, attn_blk's (a position per thread, 4 rows a
// workgroup) at 733. From
// all splits' (max, Σexp) it forms each head's softmax max M and sum L,
// rescores its positions, rounds the weights p = exp(s − M)/L to f16 as
// llama.cpp's CPU graph does before they meet V, and writes Σ p·V of its
// split. Thread (hq = lid / (D/4), dims 4·(lid % (D/4)) … +3) accumulates
// one vec4 of one head's output; QPG·D/4 must not exceed WG.
// Constants: as attn_stats.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<u32>;
//#if VQ8
@group(0) @binding(3) var<storage, read> vc: array<u32>;
//#else
@group(0) @binding(3) var<storage, read> vc: array<vec2<u32>>;
//#endif
@group(0) @binding(4) var<storage, read> stats: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> part: array<vec4<f32>>;

//#include cpu_math
//#if KVQ
//#include kv_q8
//#endif
//#include attn_tile
//#include rows
//#include attn_pv_tile

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let g = wid.x;
	let row = wid.y;
	let c = wid.z;
	if (row >= min(batch.n, QROWS) || c >= batch.splits) {
		return;
	}
	let seq = row_pos(row) + 1u;
	kv0 = row_base(row);
	let span = split_span(seq, c);
	let t0 = span.x;
	let t1 = span.y;
	load_q(lid, row, g);
	if (lid < QPG) {
		let first = (row * HEADS + g * QPG + lid) * batch.splits;
		var mx = NEG;
		for (var s = 0u; s < batch.splits; s++) {
			mx = max(mx, stats[first + s].x);
		}
		var sum = 0.0;
		for (var s = 0u; s < batch.splits; s++) {
			let st = stats[first + s];
			sum += st.y * ggml_exp(st.x - mx);
		}
		ml[lid] = vec2<f32>(mx, 1.0 / sum);
	}
	let acc = tile_pv(lid, g, t0, t1);
	let oh = lid / (D / 4u); // output head of this thread
	let od = (lid % (D / 4u)) * 4u;
	if (oh < QPG) {
		part[((row * HEADS + g * QPG + oh) * batch.splits + c) * (D / 4u) + od / 4u] = acc;
	}
}
