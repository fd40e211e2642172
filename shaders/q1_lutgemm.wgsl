// Q1_0 matrix × many activation rows (prefill) by table lookup instead of
// multiply-adds. A row's dot with one token is Σ ±q_k over its sign bits,
// block by block: with the activations as Q8_0 integers q (and a scale d_x
// per 32), every four signs pick one of 16 precomputed sums ±q₀±q₁±q₂±q₃.
// So per four weights and token a thread does one table load and one
// integer add, where an SGEMM does four FMAs; and two tokens share one
// u32 (their sums are small integers, one per 16-bit half), so one vec4
// load and four adds cover 4 weights × 8 tokens.
//
// The tables are built per K slice of 32 (one sign word per row, one Q8_0
// block of x) for the workgroup's BN = 64 tokens: T[g][nibble][pair] for
// the slice's eight groups g of four k, token pairs (2p, 2p+1) packed as
// (S(2p) + 512) | (S(2p+1) + 512) << 16, S ∈ [-508, 508]. Eight groups add
// up to at most 8·1020 per half, so the packed sum never carries across
// halves; it is unpacked once per slice into exact integers Σ ±q, scaled by
// d_w·d_x and added to f32: the CPU's integer dot up to f32 rounding.
//
// Threads: 8 warps of 32; lane = 8·rsub + pq. A thread owns the 8 tokens
// 8pq … 8pq+7 of the tile and R rows (groups of four neighbouring rows,
// 16 apart). The eight lanes of one row read one 128-byte table row, so
// every quarter warp's vec4 load is one conflict-free wavefront.
// Tokens past n and rows past M are computed from clamped loads and never
// stored.
//
// x comes packed by quantize_q8p: words [k/4][token] of four i8 (token
// stride XS, even), then the Q8_0 scales [k/32][token] as f32 bits.
// One buffer of tables, words and scales, two barriers per slice:
// double-buffering them (one barrier) and 8 rows per thread both lost to
// their occupancy on the H200.
// Constants: K, M, XS, BM (=32·R, R = 4 rows per thread),
// BM4 (=BM/4), SLICES (=K/32), XD (=K/4·XS/2: where the x scales start in
// xp, in vec2s), TSIZE and TMASK (the table's vec4s and that − 1), WSIZE,
// DSIZE (the word and token-scale arrays' sizes).
struct Batch { n: u32, pos: u32, splits: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> bits: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> xp: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> dst: array<vec4<f32>>;

//#include q1_layout

const BN: u32 = 64u;
// the 16-bit halves' bias over eight groups, plus the 2²³ of the
// float-from-bits conversion: 2²³ + 8·512
const UNBIAS: f32 = 8392704.0;

// per buffer: the tables [g][nibble][pair / 4] (8 × 16 × 8 vec4s), the
// slice's sign word and d_w of each row, d_x of each octet's even and odd
// tokens
var<workgroup> T: array<vec4<u32>, TSIZE>;
var<workgroup> Ws: array<vec4<u32>, WSIZE>;
var<workgroup> Dw: array<vec4<f32>, WSIZE>;
var<workgroup> DxE: array<vec4<f32>, DSIZE>;
var<workgroup> DxO: array<vec4<f32>, DSIZE>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let row0 = wid.x * BM;
	let tok0 = wid.y * BN;
	let n = min(batch.n, XS);
	let lane = lid % 32u;
	let pq = lane % 8u;
	// this thread's first row in the tile (rows rl … rl+3)
	let rl = (lid / 32u) * (4u * BM / 32u) + (lane / 8u) * 4u;

	// the loaders: row lid's sign word and scale; as table builder,
	// group bg of the slice for token pair bp
	let wrow = min(row0 + lid, M - 1u);
	let bg = lid / 32u;
	let bp = lid % 32u;
	let btok = min(tok0 + 2u * bp, XS - 2u) / 2u;

	var next = load(0u, lid, wrow, bg, btok);

	var a0e = vec4<f32>(0.0);
	var a0o = vec4<f32>(0.0);
	var a1e = vec4<f32>(0.0);
	var a1o = vec4<f32>(0.0);
	var a2e = vec4<f32>(0.0);
	var a2o = vec4<f32>(0.0);
	var a3e = vec4<f32>(0.0);
	var a3o = vec4<f32>(0.0);

	for (var s = 0u; s < SLICES; s++) {
		let cur = 0u;
		workgroupBarrier();
		stage(0u, lid, bg, bp, next);
		workgroupBarrier();
		if (s + 1u < SLICES) {
			next = load(s + 1u, lid, wrow, bg, btok);
		}
		let dxe = DxE[cur * 8u + pq];
		let dxo = DxO[cur * 8u + pq];
		let tb = cur * 1024u + pq;
		let w4 = Ws[cur * BM4 + rl / 4u];
		let d4 = Dw[cur * BM4 + rl / 4u];
		let p0 = rowsum(w4.x, tb);
		a0e += lo(p0) * (d4.x * dxe);
		a0o += hi(p0) * (d4.x * dxo);
		let p1 = rowsum(w4.y, tb);
		a1e += lo(p1) * (d4.y * dxe);
		a1o += hi(p1) * (d4.y * dxo);
		let p2 = rowsum(w4.z, tb);
		a2e += lo(p2) * (d4.z * dxe);
		a2o += hi(p2) * (d4.z * dxo);
		let p3 = rowsum(w4.w, tb);
		a3e += lo(p3) * (d4.w * dxe);
		a3o += hi(p3) * (d4.w * dxo);
	}

	let t = tok0 + pq * 8u;
	store(t, row0 + rl, n, a0e, a0o, a1e, a1o, a2e, a2o, a3e, a3o);
}

// rowsum is one row's packed sums over the slice for the thread's eight
// tokens: per group of four k, the table entry its four sign bits pick.
fn rowsum(w: u32, tb: u32) -> vec4<u32> {
	var p = vec4<u32>(0u);
	for (var g = 0u; g < 8u; g++) {
		p += T[(tb + g * 128u + ((w >> (4u * g)) & 15u) * 8u) & TMASK];
	}
	return p;
}

// lo and hi are the exact integer sums Σ ±q of the even and odd tokens:
// 2²³ + h read as f32 bits, minus 2²³ and the bias.
fn lo(p: vec4<u32>) -> vec4<f32> {
	return bitcast<vec4<f32>>((p & vec4<u32>(0xffffu)) | vec4<u32>(0x4b000000u)) - UNBIAS;
}

fn hi(p: vec4<u32>) -> vec4<f32> {
	return bitcast<vec4<f32>>((p >> vec4<u32>(16u)) | vec4<u32>(0x4b000000u)) - UNBIAS;
}

// Slice is what one thread loads of a K slice: its row's sign word and
// scale (threads lid < BM), and as table builder its group's packed x and
// the token pair's scales.
struct Slice {
	word: u32,
	d: f32,
	xw: vec2<u32>,
	dx: vec2<f32>,
}

// load reads slice s's values for thread lid (row wrow, group bg, token
// pair btok).
fn load(s: u32, lid: u32, wrow: u32, bg: u32, btok: u32) -> Slice {
	var v: Slice;
	if (lid < BM) {
		v.word = bits[q1_word(wrow, s)];
		v.d = scales[q1_scale(wrow, s / 4u)];
	}
	v.xw = xp[(s * 8u + bg) * (XS / 2u) + btok];
	v.dx = bitcast<vec2<f32>>(xp[XD + s * (XS / 2u) + btok]);
	return v;
}

// stage puts a slice's loaded values into buffer buf: the row words and
// scales, the token scales, and the tables built from x.
fn stage(buf: u32, lid: u32, bg: u32, bp: u32, v: Slice) {
	if (lid < BM) {
		Ws[buf * BM4 + lid / 4u][lid % 4u] = v.word;
		Dw[buf * BM4 + lid / 4u][lid % 4u] = v.d;
	}
	if (bg == 0u) {
		// tokens 2bp, 2bp+1 are octet bp/4's even and odd token bp%4
		DxE[buf * 8u + bp / 4u][bp % 4u] = v.dx.x;
		DxO[buf * 8u + bp / 4u][bp % 4u] = v.dx.y;
	}
	build(buf * 1024u + bg * 128u + bp / 4u, bp % 4u, bitcast<vec2<i32>>(v.xw));
}

// store writes the outputs of rows row … row+3 for tokens t … t+7: the
// even tokens' sums in e*, the odd ones' in o*, one vec4 per row.
fn store(t: u32, row: u32, n: u32, e0: vec4<f32>, o0: vec4<f32>, e1: vec4<f32>, o1: vec4<f32>, e2: vec4<f32>, o2: vec4<f32>, e3: vec4<f32>, o3: vec4<f32>) {
	if (row >= M) {
		return;
	}
	for (var c = 0u; c < 4u; c++) {
		let te = t + 2u * c;
		if (te < n) {
			dst[te * (M / 4u) + row / 4u] = vec4<f32>(e0[c], e1[c], e2[c], e3[c]);
		}
		if (te + 1u < n) {
			dst[(te + 1u) * (M / 4u) + row / 4u] = vec4<f32>(o0[c], o1[c], o2[c], o3[c]);
		}
	}
}

// build writes one group's 16 sums for one token pair at T[base + 8·nib]
// component c: entry nib holds Σ_j (bit j of nib ? q_j : −q_j) + 512 for
// both tokens, built up from the all-negative sum by adding 2q_j (as one
// i32: the halves never borrow, each partial sum being itself an entry in
// range).
fn build(base: u32, c: u32, x: vec2<i32>) {
	let a = vec4<i32>(extractBits(x.x, 0u, 8u), extractBits(x.x, 8u, 8u), extractBits(x.x, 16u, 8u), extractBits(x.x, 24u, 8u));
	let b = vec4<i32>(extractBits(x.y, 0u, 8u), extractBits(x.y, 8u, 8u), extractBits(x.y, 16u, 8u), extractBits(x.y, 24u, 8u));
	let dj = 2 * a + 131072 * b;
	let e0 = (512 - a.x - a.y - a.z - a.w) + 65536 * (512 - b.x - b.y - b.z - b.w);
	let e1 = e0 + dj.x;
	let e2 = e0 + dj.y;
	let e3 = e2 + dj.x;
	let e4 = e0 + dj.z;
	let e5 = e4 + dj.x;
	let e6 = e4 + dj.y;
	let e7 = e6 + dj.x;
	T[base][c] = bitcast<u32>(e0);
	T[base + 8u][c] = bitcast<u32>(e1);
	T[base + 16u][c] = bitcast<u32>(e2);
	T[base + 24u][c] = bitcast<u32>(e3);
	T[base + 32u][c] = bitcast<u32>(e4);
	T[base + 40u][c] = bitcast<u32>(e5);
	T[base + 48u][c] = bitcast<u32>(e6);
	T[base + 56u][c] = bitcast<u32>(e7);
	T[base + 64u][c] = bitcast<u32>(e0 + dj.w);
	T[base + 72u][c] = bitcast<u32>(e1 + dj.w);
	T[base + 80u][c] = bitcast<u32>(e2 + dj.w);
	T[base + 88u][c] = bitcast<u32>(e3 + dj.w);
	T[base + 96u][c] = bitcast<u32>(e4 + dj.w);
	T[base + 104u][c] = bitcast<u32>(e5 + dj.w);
	T[base + 112u][c] = bitcast<u32>(e6 + dj.w);
	T[base + 120u][c] = bitcast<u32>(e7 + dj.w);
}
