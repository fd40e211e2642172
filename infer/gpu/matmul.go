package gpu

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
	"github.com/bonsai-chat/bonsai/shaders"
	"github.com/cogentcore/webgpu/wgpu"
)

// MatMul over the kernel table (layouts.go) and its prompt and generic
// kernels; the decode Q1_0 matvecs are in matvec.go.

// MatMul runs the first kernel of w's layout (layouts) for a decode step
// or a prompt pass that takes the shape and the device's limits.
func (b *Backend) MatMul(dstT infer.Tensor, wI infer.Weight, xT infer.Tensor) {
	if b.err != nil || b.enc == nil {
		return
	}
	dst, w, x := b.asTensor("MatMul dst", dstT), b.weightArg("MatMul", wI), b.asTensor("MatMul x", xT)
	if dst == nil || w == nil || x == nil {
		return
	}
	if x.cols != w.k || dst.cols != w.m {
		b.shapeErr("MatMul: %s is %d×%d, x has %d columns and dst %d", w.name, w.m, w.k, x.cols, dst.cols)
		return
	}
	if dst == x {
		b.shapeErr("MatMul: dst %s aliases x", dst.name)
		return
	}
	rows := min(x.rows, dst.rows)
	mm := matmul{dst: dst, w: w, x: x, rows: rows, n: min(rows, b.n)}
	kernels := w.layout.prompt
	switch {
	case mm.n == 1:
		kernels = w.layout.decode
	case mm.n <= rowsMaxTokens:
		kernels = w.layout.rows
	}
	for _, k := range kernels {
		if k.run(b, mm) {
			return
		}
	}
	b.fail(fmt.Errorf("gpu: MatMul: no kernel of %s takes %s (%d×%d) over %d tokens: %w", w.layout.name, w.name, w.m, w.k, mm.n, ErrUnsupported))
}

// matmul is one MatMul: dst = x·wᵀ over the first n of rows rows.
type matmul struct {
	dst  *tensor
	w    *weight
	x    *tensor
	rows int
	n    int
}

// matmulKernel is a kernel of a layout's row: run encodes mm and reports
// true, or reports false, encoding nothing, where the kernel cannot take
// mm's shape on this device.
type matmulKernel struct {
	name string
	run  func(b *Backend, mm matmul) bool
}

// recordMatVec records a decode Q1_0 matvec for fuse, which joins it with
// its neighbours (fuse.go); encodeMatVec picks its kernel.
func recordMatVec(b *Backend, mm matmul) bool {
	if mm.w.m%8 != 0 {
		return false
	}
	b.record(node{op: opMatVec, dst: mm.dst, x: mm.x, w: mm.w})
	return true
}

// touchOperands readies a MatMul's operands for a dispatch outside the op
// list.
func (b *Backend) touchOperands(mm matmul) {
	b.touch(mm.x)
	b.touch(mm.dst)
}

// q1Gemm2 runs q1_gemm2, the prompt GEMM where q1_lutgemm's 17.6 KB of
// workgroup memory is more than the device grants.
func q1Gemm2(b *Backend, mm matmul) bool {
	dst, w, x, rows, n := mm.dst, mm.w, mm.x, mm.rows, mm.n
	t, ok := b.gemmTile(w, n)
	if !ok {
		return false
	}
	b.touchOperands(mm)
	xq := b.roundActivations(x, w, rows, n)
	if xq == nil {
		return true
	}
	o := b.prepared(opKey{kind: "q1gemm2", a: dst, b: w, c: x, i: t.rm*4 + t.rn}, func() (*kernel, []binding, error) {
		bm, bn := 64*t.rm, 64*t.rn
		k, err := b.d.kernel("q1_gemm2", q1Layout(map[string]shaders.Const{
			"K": shaders.U32(w.k), "M": shaders.U32(w.m), "WORDS": shaders.U32(w.k / 32), "XROWS": shaders.U32(rows),
			"BM": shaders.U32(bm), "BN": shaders.U32(bn), "ASIZE": shaders.U32(8 * bm), "BSIZE": shaders.U32(8 * bn), "AK": shaders.U32(32 * bm / 256), "XV": shaders.U32(bn / 32),
			"RM2": shaders.Flag(t.rm == 2)}, w.interleaved, w.m))
		return k, []binding{whole(b.batchBuf), w.bits.binding(), w.scales.binding(), whole(xq), whole(dst.buf)}, err
	})
	b.dispatch(o, ceilDiv(w.m, 64*t.rm), ceilDiv(n, 64*t.rn), 1)
	return true
}

// q1MatMul runs q1_matmul, the Q1_0 kernel for every shape: f32
// activations, rows per workgroup halved until they divide the rows.
func q1MatMul(b *Backend, mm matmul) bool {
	dst, w, x, rows, n := mm.dst, mm.w, mm.x, mm.rows, mm.n
	decode := n == 1
	rpw, tt, wg := matmulShape(decode)
	b.touchOperands(mm)
	words := w.k / 32
	if words < wg {
		wg = 32
		for wg*2 <= words && wg < 128 {
			wg *= 2
		}
	}
	for w.m%rpw != 0 {
		rpw /= 2
	}
	o := b.prepared(opKey{kind: "q1mm", a: dst, b: w, c: x, i: boolInt(decode)}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("q1_matmul", q1Layout(map[string]shaders.Const{
			"K": shaders.U32(w.k), "M": shaders.U32(w.m), "WORDS": shaders.U32(words), "RPW": shaders.U32(rpw),
			"TT": shaders.U32(tt), "WG": shaders.U32(wg), "XROWS": shaders.U32(rows),
			"ACC": shaders.U32(rpw * tt), "RED": shaders.U32(wg * rpw * tt)}, w.interleaved, w.m))
		return k, []binding{whole(b.batchBuf), w.bits.binding(), w.scales.binding(), whole(x.buf), whole(dst.buf)}, err
	})
	b.dispatch(o, w.m/rpw, ceilDiv(n, tt), 1)
	return true
}

// matmulShape is the generic matmuls' (q1_matmul, q2_matmul, f32_matmul)
// rows per workgroup, tokens per thread and workgroup size.
func matmulShape(decode bool) (rpw, tt, wg int) {
	if decode {
		return 8, 1, 128
	}
	return 4, 8, 64
}

// beginRounded readies a matmul on x rounded as llama.cpp rounds it for
// w's type (q2_matmul, f32_matmul): the operands touched, x's rounding
// (nil after a failure) and the generic tiling's rows per workgroup and
// tokens per thread.
func (b *Backend) beginRounded(mm matmul) (xin *wgpu.Buffer, rpw, tt int) {
	rpw, tt, _ = matmulShape(mm.n == 1)
	b.touchOperands(mm)
	return b.roundActivations(mm.x, mm.w, mm.rows, mm.n), rpw, tt
}

// q2MatMul runs q2_matmul over each chunk of a 2-bit matrix, on x rounded
// as llama.cpp rounds it for the type.
func q2MatMul(b *Backend, mm matmul) bool {
	dst, w, x, rows, n := mm.dst, mm.w, mm.x, mm.rows, mm.n
	decode := n == 1
	xin, rpw, tt := b.beginRounded(mm)
	if xin == nil {
		return true
	}
	group, _ := twoBit(w.typ)
	for ci, c := range w.twoBit {
		crpw := rpw
		for c.rows%crpw != 0 {
			crpw /= 2
		}
		o := b.prepared(opKey{kind: "q2mm", a: dst, b: w, c: x, i: boolInt(decode) + 2*ci}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("q2_matmul", map[string]shaders.Const{
				"K": shaders.U32(w.k), "M": shaders.U32(w.m), "ROW0": shaders.U32(c.row0), "GROUP": shaders.U32(group),
				"RPW": shaders.U32(crpw), "TT": shaders.U32(tt), "WG": shaders.U32(64), "XROWS": shaders.U32(rows),
				"ACC": shaders.U32(crpw * tt), "RED": shaders.U32(64 * crpw * tt)})
			return k, []binding{whole(b.batchBuf), whole(c.codes), whole(c.scales), whole(xin), whole(dst.buf)}, err
		})
		b.dispatch(o, c.rows/crpw, ceilDiv(n, tt), 1)
	}
	b.readRounded(x)
	return true
}

// f32MatMul runs f32_matmul over each chunk of an f32 matrix, on x
// rounded as llama.cpp rounds it for the file's type.
func f32MatMul(b *Backend, mm matmul) bool {
	dst, w, x, rows, n := mm.dst, mm.w, mm.x, mm.rows, mm.n
	decode := n == 1
	xin, rpw, tt := b.beginRounded(mm)
	if xin == nil {
		return true
	}
	for ci, c := range w.chunks {
		crpw := rpw
		for c.rows%crpw != 0 || decode && crpw > 1 && c.rows/crpw < f32DecodeGroups {
			crpw /= 2
		}
		o := b.prepared(opKey{kind: "f32mm", a: dst, b: w, c: x, i: boolInt(decode) + 2*ci}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("f32_matmul", map[string]shaders.Const{
				"K": shaders.U32(w.k), "M": shaders.U32(w.m), "ROW0": shaders.U32(c.row0), "RPW": shaders.U32(crpw),
				"TT": shaders.U32(tt), "WG": shaders.U32(64), "XROWS": shaders.U32(rows),
				"ACC": shaders.U32(crpw * tt), "RED": shaders.U32(64 * crpw * tt)})
			return k, []binding{whole(b.batchBuf), whole(c.buf), whole(xin), whole(dst.buf)}, err
		})
		b.dispatch(o, c.rows/crpw, ceilDiv(n, tt), 1)
	}
	b.readRounded(x)
	return true
}

// f32DecodeGroups is the fewest workgroups a decoding step's f32 matvec
// is split into, rows per workgroup permitting: a small matrix (qwen35's
// 48-row β and α projections) in 8-row workgroups kept 6 of the H200's 132
// SMs busy. Rows per workgroup do not change a row's summation order.
const f32DecodeGroups = 256

// gemmTile is q1_gemm2's tile: RM × 64 rows by RN × 64 tokens per
// workgroup.
type gemmTile struct{ rm, rn int }

// gemmTile is q1_gemm2's tile for a prompt pass of n tokens over w, or ok
// false where rows are not a multiple of 4: 128 × 64 (on the H200 within
// 3 % of the best tile on every 1.7B and 8B shape) unless that leaves a
// big GPU's SMs without a workgroup or does not fit the workgroup memory,
// else 64 × 64 (16 KB, the least any WebGPU device grants).
func (b *Backend) gemmTile(w *weight, n int) (gemmTile, bool) {
	if n < 2 || w.m%4 != 0 || w.k%128 != 0 {
		return gemmTile{}, false
	}
	t := gemmTile{2, 1}
	if ceilDiv(w.m, 128)*ceilDiv(n, 64) < 128 || t.workgroupBytes() > int(b.d.Limits.MaxComputeWorkgroupStorageSize) {
		t = gemmTile{1, 1}
	}
	return t, t.workgroupBytes() <= int(b.d.Limits.MaxComputeWorkgroupStorageSize)
}

// workgroupBytes is q1_gemm2's workgroup memory for the tile: 32 values
// of K for each of its rows and tokens.
func (t gemmTile) workgroupBytes() int { return (t.rm + t.rn) * 64 * 32 * 4 }

// q1Layout adds to defs the layout of up to three Q1_0 matrices stored
// back to back (row-major or interleaved; their row ends), as
// shaders/q1_layout.wgsli addresses them.
func q1Layout(defs map[string]shaders.Const, interleaved bool, ends ...int) map[string]shaders.Const {
	defs["Q1IL"] = shaders.Flag(interleaved)
	m0, m1, mt := ends[0], ends[0], ends[len(ends)-1]
	if len(ends) > 1 {
		m1 = ends[1]
	}
	defs["Q1M0"], defs["Q1M1"], defs["Q1MT"] = shaders.U32(m0), shaders.U32(m1), shaders.U32(mt)
	return defs
}

// roundActivations rounds x to w's vec-dot type into x's scratch buffer
// (F32 weights use x as is).
func (b *Backend) roundActivations(x *tensor, w *weight, rows, n int) *wgpu.Buffer {
	mode, block := activationMode(w.typ)
	if mode == "" {
		return x.buf
	}
	if w.k%block != 0 {
		b.shapeErr("MatMul: %s rows of %d are not a multiple of the %d-value activation block", w.name, w.k, block)
		return nil
	}
	if buf, current := b.roundingBuffer(x, mode); buf == nil || current {
		return buf
	}
	o := b.prepared(opKey{kind: "quant", a: x, i: block, b: mode}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("quantize", map[string]shaders.Const{
			"K": shaders.U32(x.cols), "BLOCK": shaders.U32(block), "XROWS": shaders.U32(rows), mode: shaders.Flag(true)})
		return k, []binding{whole(b.batchBuf), whole(x.buf), whole(x.scratch)}, err
	})
	b.dispatch(o, ceilDiv(x.cols/block, 64), n, 1)
	b.rounded.x, b.rounded.mode, b.rounded.at = x, mode, b.dispatches
	return x.scratch
}

// roundingBuffer is x's rounding buffer (allocated on first use: x's
// size in f32), and whether it already holds x rounded in mode with only
// that rounding's readers dispatched since; nil after a failure.
func (b *Backend) roundingBuffer(x *tensor, mode string) (buf *wgpu.Buffer, current bool) {
	if b.rounded.x == x && b.rounded.mode == mode && b.rounded.at == b.dispatches {
		return x.scratch, true
	}
	if x.scratch == nil {
		buf, err := b.d.newBuffer(x.name+".q", uint64(x.rows*x.cols*4), storageUsage)
		if err != nil {
			b.fail(err)
			return nil, false
		}
		x.scratch = buf
	}
	return x.scratch, false
}

// readRounded records that the dispatches since x was rounded only read
// its rounding (matmuls of x into other tensors).
func (b *Backend) readRounded(x *tensor) {
	if b.rounded.x == x {
		b.rounded.at = b.dispatches
	}
}

// activationMode maps a weight type to how llama.cpp quantizes the
// activations it meets (quant.VecDotType; Q8_0 for a type the CPU codecs
// do not know).
func activationMode(t gguf.Type) (mode string, block int) {
	if quant.Supported(t) {
		t = quant.VecDotType(t)
	}
	switch t {
	case gguf.F32:
		return "", 1
	case gguf.F16:
		return "F16", 1
	case gguf.BF16:
		return "BF16", 1
	case gguf.Q8_K, gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
		return "Q8_K", 256
	}
	return "Q8_0", 32
}
