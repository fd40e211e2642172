package gpu

import (
	"fmt"
	"sort"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/shaders"
	"github.com/cogentcore/webgpu/wgpu"
)

// Q8_0, Q4_0, Q4_K, Q5_K and Q6_K stay in the file's blocks on the device
// (shaders/qblock.wgsli): the kernels read the bytes the file stores and
// dequantize in registers. Q4_K's 144-byte and Q5_K's 176-byte blocks are
// whole words already; Q8_0 (34 bytes), Q4_0 (18) and Q6_K (210) have one
// f16 scale off the word grid, which the load moves to an array of halves
// after the chunk's blocks, so a chunk is the file's bytes rearranged.

// blockFormat is how blocks of one type are laid out for the kernels.
type blockFormat struct {
	flag string // the shader's type define
	// dAt is the byte offset in the block of the f16 scale moved to the
	// array of halves, or -1 where the block stays whole
	dAt int
}

var blockFormats = map[gguf.Type]blockFormat{
	gguf.Q8_0: {"Q8_0", 0},
	gguf.Q4_0: {"Q4_0", 0},
	gguf.Q4_K: {"Q4_K", -1},
	gguf.Q5_K: {"Q5_K", -1},
	gguf.Q6_K: {"Q6_K", 208},
}

func hasBlockFormat(t gguf.Type) bool { _, ok := blockFormats[t]; return ok }

// blockChunk is a range of rows of a block-quantized matrix in one
// buffer: the blocks' words, then, for a type whose scale moves (dAt ≥ 0),
// the halves from word dOff.
type blockChunk struct {
	buf        *wgpu.Buffer
	row0, rows int
	dOff       int // word index of the array of halves
}

// blockWords is the words of one block on the device (without a moved
// scale).
func blockWords(t gguf.Type) int {
	n := t.BlockBytes()
	if blockFormats[t].dAt >= 0 {
		n -= 2
	}
	return n / 4
}

// loadBlocks places a block-quantized matrix in row chunks that each fit
// one storage binding. A single row is dequantized instead: the ops that
// take vectors (norm weights, biases) read f32.
func (w *weight) loadBlocks(d *Device, rowBytes int) error {
	if w.m == 1 {
		return w.dequantize(d, rowBytes)
	}
	f := blockFormats[w.typ]
	blocks := w.k / w.typ.BlockSize()
	bb, bw := w.typ.BlockBytes(), blockWords(w.typ)
	maxRows := int(d.Limits.MaxStorageBufferBindingSize / uint64(rowBytes+4))
	maxRows -= maxRows % 8
	if maxRows < 8 {
		return fmt.Errorf("gpu: weight %s: rows of %d values exceed a storage binding: %w", w.name, w.k, ErrOutOfMemory)
	}
	for r0 := 0; r0 < w.m; r0 += maxRows {
		rows := min(maxRows, w.m-r0)
		src := w.data[r0*rowBytes : (r0+rows)*rowBytes]
		n := rows * blocks
		dOff := n * bw
		var buf []byte
		if f.dAt < 0 {
			buf = src
		} else {
			buf = make([]byte, dOff*4+(n+1)/2*4)
			for i := 0; i < n; i++ {
				blk := src[i*bb : (i+1)*bb]
				body := buf[i*bw*4 : (i+1)*bw*4]
				copy(body, blk[:f.dAt])
				copy(body[f.dAt:], blk[f.dAt+2:])
				copy(buf[dOff*4+2*i:], blk[f.dAt:f.dAt+2])
			}
		}
		b, err := d.upload(fmt.Sprintf("%s.%s[%d]", w.name, w.typ, r0), buf)
		if err != nil {
			return err
		}
		w.blocks = append(w.blocks, blockChunk{buf: b, row0: r0, rows: rows, dOff: dOff})
		w.bytes += int64(len(buf))
	}
	return nil
}

// blockDefs are the constants both block kernels take for chunk c of w.
func blockDefs(w *weight, c blockChunk, rows int) map[string]shaders.Const {
	return map[string]shaders.Const{
		"K": shaders.U32(w.k), "M": shaders.U32(w.m), "ROW0": shaders.U32(c.row0), "ROWS": shaders.U32(c.rows),
		"BLOCKS": shaders.U32(w.k / w.typ.BlockSize()), "DOFF": shaders.U32(c.dOff), "XROWS": shaders.U32(rows),
		blockFormats[w.typ].flag: shaders.Flag(true)}
}

// blockMatMul runs qblock_matmul over each chunk of a block-quantized
// matrix, on x rounded as llama.cpp rounds it for the type: a decode
// step's matvec, and a prompt pass's where qblock_gemm does not fit.
func blockMatMul(b *Backend, mm matmul) bool {
	if len(mm.w.blocks) == 0 {
		return false
	}
	dst, w, x, rows, n := mm.dst, mm.w, mm.x, mm.rows, mm.n
	decode := n == 1
	xin, rpw, tt := b.beginRounded(mm)
	if xin == nil {
		return true
	}
	for ci, c := range w.blocks {
		crpw := rpw
		for c.rows%crpw != 0 || decode && crpw > 1 && c.rows/crpw < f32DecodeGroups {
			crpw /= 2
		}
		o := b.prepared(opKey{kind: "qbmm", a: dst, b: w, c: x, i: boolInt(decode) + 2*ci}, func() (*kernel, []binding, error) {
			defs := blockDefs(w, c, rows)
			defs["RPW"], defs["TT"], defs["WG"] = shaders.U32(crpw), shaders.U32(tt), shaders.U32(64)
			defs["ACC"], defs["RED"] = shaders.U32(crpw*tt), shaders.U32(64*crpw*tt)
			defs["DECODE"] = shaders.Flag(decode)
			k, err := b.d.kernel("qblock_matmul", defs)
			return k, []binding{whole(b.batchBuf), whole(c.buf), whole(xin), whole(dst.buf)}, err
		})
		b.dispatch(o, c.rows/crpw, ceilDiv(n, tt), 1)
	}
	b.readRounded(x)
	return true
}

// qblockGemmBytes is qblock_gemm's workgroup memory: a 32-deep slice of
// 64 rows and of 64 tokens.
const qblockGemmBytes = 2 * 32 * 64 * 4

// blockGemm runs qblock_gemm, the prompt GEMM of a block-quantized
// matrix, where the device grants its workgroup memory.
func blockGemm(b *Backend, mm matmul) bool {
	if len(mm.w.blocks) == 0 || mm.n < 2 || b.d.Limits.MaxComputeWorkgroupStorageSize < qblockGemmBytes {
		return false
	}
	dst, w, x, rows, n := mm.dst, mm.w, mm.x, mm.rows, mm.n
	b.touchOperands(mm)
	xin := b.roundActivations(x, w, rows, n)
	if xin == nil {
		return true
	}
	for ci, c := range w.blocks {
		o := b.prepared(opKey{kind: "qbgemm", a: dst, b: w, c: x, i: ci}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("qblock_gemm", blockDefs(w, c, rows))
			return k, []binding{whole(b.batchBuf), whole(c.buf), whole(xin), whole(dst.buf)}, err
		})
		b.dispatch(o, ceilDiv(c.rows, 64), ceilDiv(n, 64), 1)
	}
	b.readRounded(x)
	return true
}

// weightSummary is the device bytes of ws by file type, marking the types
// held as f32: "weights on the device: 4367 MiB (q4_K 3744 MiB, q6_K 622
// MiB, f32 1 MiB)".
func weightSummary(ws map[string]*weight) string {
	by := map[string]int64{}
	var total int64
	for _, w := range ws {
		name := w.typ.String()
		if len(w.chunks) > 0 && w.typ != gguf.F32 {
			name += " as f32"
		}
		by[name] += w.bytes
		total += w.bytes
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.1f MiB", n, float64(by[n])/(1<<20))
	}
	return fmt.Sprintf("weights on the device: %.1f MiB (%s)", float64(total)/(1<<20), strings.Join(parts, ", "))
}
