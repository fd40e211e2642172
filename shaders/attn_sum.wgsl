// Attention, pass 3 of 3: the weights of every split are already the final
// softmax (normalised by the global max and sum), so the output is the
// plain sum of the splits' Σ p·V. One thread per output value. With Q8
// (decode, HEADS·D a multiple of WG) also the output's Q8_0 rounding
// (q8_group) for the output projection's q1_xq, with TAB its lookup table.
// With VROTATE (a Q8_0 V, rotated by llama.cpp's blocks of VROT = WG) the
// sum is rotated back: HEADS·D is then a multiple of WG, as with Q8.
// Constants: HEADS, D, QROWS, WG (=64), VRS (with VROTATE); flags Q8, TAB,
// VROTATE.
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
//#if Q8
@group(0) @binding(3) var<storage, read_write> xq: array<f32>;
@group(0) @binding(4) var<storage, read_write> xsum: array<f32>;
//#if TAB
@group(0) @binding(5) var<storage, read_write> xtab: array<vec4<f32>>;
//#endif
//#include cpu_math
//#include q8_tab
//#include q8_group
//#endif

//#if VROTATE
var<workgroup> ob: array<f32, WG>;
//#endif

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
	let i = gid.x; // head·D + d
	let row = gid.y;
//#if VROTATE
	let lid = i % WG;
//#else
//#if Q8
	let lid = i % WG;
//#else
	if (i >= HEADS * D || row >= min(batch.n, QROWS)) {
		return;
	}
//#endif
//#endif
	let h = i / D;
	let d = i % D;
	// in split order, four loads issued before their adds (a loop of one
	// load per add waited on each of up to maxSplits in turn); sixteen
	// through a private array (9fe01d4) is back out with attn_blk_pv's
	// (see there)
	let first = (row * HEADS + h) * batch.splits * D + d;
	var a = 0.0;
	var c = 0u;
	for (; c + 4u <= batch.splits; c += 4u) {
		let p0 = part[first + c * D];
		let p1 = part[first + (c + 1u) * D];
		let p2 = part[first + (c + 2u) * D];
		let p3 = part[first + (c + 3u) * D];
		a += p0;
		a += p1;
		a += p2;
		a += p3;
	}
	for (; c < batch.splits; c++) {
		a += part[first + c * D];
	}
//#if VROTATE
	// a Q8_0 V's rows were rotated by blocks of WG = VROT: the output is
	// rotated back
	ob[lid] = a * VRS;
	workgroupBarrier();
	for (var hb = 1u; hb < WG; hb <<= 1u) {
		if (lid < WG / 2u) {
			let j = lid / hb * 2u * hb + lid % hb;
			let x = ob[j];
			let y = ob[j + hb];
			ob[j] = x + y;
			ob[j + hb] = x - y;
		}
		workgroupBarrier();
	}
	a = ob[lid];
//#endif
	dst[row * HEADS * D + i] = a;
//#if Q8
	let r = q8_round(lid, a);
	xq[i] = r.x;
	if (lid % 32u == 0u) {
		xsum[i / 32u] = r.y;
	}
//#if TAB
	xtab[i] = q8_entries(lid);
//#endif
//#endif
}
