package gpu

import (
	"github.com/cogentcore/webgpu/wgpu"

	"github.com/bonsai-chat/bonsai/shaders"
)

// A prompt pass's Q1_0 GEMM by table lookup (shaders/q1_lutgemm.wgsl).
// The two numbers: 8B pp512 multiplies 6.95 G weights by 512 tokens,
// 7.1 T multiply-adds, and an f32 FMA per weight-token pair caps the H200
// (67 TFLOP/s) near 4,300 tok/s, q1_gemm2 reaching 39 % of that. Summing
// four weights' ±q from a 16-entry table costs one 16-byte workgroup load
// per 4 weights × 8 tokens and four integer adds, so the bound moves to
// workgroup-memory bandwidth (128 B/clock per SM: 256 pairs per clock,
// twice the FMA rate), with a table build per 32 k of 1/R of the reads.

// lutGemmR is q1_lutgemm's rows per thread: a workgroup takes 32·R =
// 128 rows × 64 tokens. On the H200 this shape (one buffer of tables,
// two barriers per slice) ran the 512-token prompt of the 8B at 3,951
// tok/s, the 1.7B at 11,050 and the 27B at 1,144, against q1_gemm2's
// 1,724, 6,187 and 473, and beat 8 rows per thread and double-buffered
// slices on all three.
const lutGemmR = 4

// lutGemmWorkgroupBytes is q1_lutgemm's workgroup memory: 16 KiB of
// tables, a word and a scale per row, 64 token scales (17.6 KB: within
// the 32 KB of every adapter measured, lavapipe's included).
const lutGemmWorkgroupBytes = 16<<10 + 32*lutGemmR*8 + 64*4

// lutGemm runs q1_lutgemm, the prompt GEMM of Q1_0 matrices, where it
// runs: a prompt pass (not a decode step), rows a multiple of 4, K of 128
// and the workgroup memory it needs.
func lutGemm(b *Backend, mm matmul) bool {
	w := mm.w
	if mm.n < 2 || w.m%4 != 0 || w.k%128 != 0 || lutGemmWorkgroupBytes > int(b.d.Limits.MaxComputeWorkgroupStorageSize) {
		return false
	}
	// the packed activations share x's rounding buffer
	if lutPackedWords(w.k, mm.rows) > mm.rows*w.k {
		return false
	}
	b.touchOperands(mm)
	b.encodeLutGemm(mm.dst, w, mm.x, mm.rows, mm.n)
	return true
}

// lutStride is the packed activations' token stride: the rows, made even
// so a vec2 holds a token pair.
func lutStride(rows int) int { return rows + rows%2 }

// lutPackedWords is the size of x packed for q1_lutgemm: K/4 words of
// four i8 and K/32 scales per token.
func lutPackedWords(k, rows int) int { return (k/4 + k/32) * lutStride(rows) }

// encodeLutGemm encodes dst = x·wᵀ for n tokens with q1_lutgemm.
func (b *Backend) encodeLutGemm(dst *tensor, w *weight, x *tensor, rows, n int) {
	xp := b.packActivations(x, rows, n)
	if xp == nil {
		return
	}
	xs := lutStride(rows)
	const bm, bufs = 32 * lutGemmR, 1
	o := b.prepared(opKey{kind: "q1lut", a: dst, b: w, c: x}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("q1_lutgemm", q1Layout(map[string]shaders.Const{
			"K": shaders.U32(w.k), "M": shaders.U32(w.m), "XS": shaders.U32(xs), "BM": shaders.U32(bm), "BM4": shaders.U32(bm / 4),
			"SLICES": shaders.U32(w.k / 32), "XD": shaders.U32(w.k / 4 * xs / 2), "TSIZE": shaders.U32(1024 * bufs), "TMASK": shaders.U32(1024*bufs - 1),
			"WSIZE": shaders.U32(bufs * bm / 4), "DSIZE": shaders.U32(8 * bufs)}, w.interleaved, w.m))
		return k, []binding{whole(b.batchBuf), w.bits.binding(), w.scales.binding(), whole(xp), whole(dst.buf)}, err
	})
	b.dispatch(o, ceilDiv(w.m, bm), ceilDiv(n, 64), 1)
	// the next matmul of x (gate after up, k after q) reuses the packing
	b.readRounded(x)
}

// packActivations rounds x's first n rows to Q8_0 and packs them for
// q1_lutgemm into x's rounding buffer (reused while x is unchanged, as
// roundActivations does).
func (b *Backend) packActivations(x *tensor, rows, n int) *wgpu.Buffer {
	const mode = "Q8P"
	if buf, current := b.roundingBuffer(x, mode); buf == nil || current {
		return buf
	}
	o := b.prepared(opKey{kind: "quantq8p", a: x, i: rows}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("quantize_q8p", map[string]shaders.Const{
			"K": shaders.U32(x.cols), "XROWS": shaders.U32(rows), "XS": shaders.U32(lutStride(rows))})
		return k, []binding{whole(b.batchBuf), whole(x.buf), whole(x.scratch)}, err
	})
	b.dispatch(o, ceilDiv(x.cols/32, 64), n, 1)
	b.rounded.x, b.rounded.mode, b.rounded.at = x, mode, b.dispatches
	return x.scratch
}
