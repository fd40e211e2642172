package gpu

import (
	"encoding/binary"
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/quant"
	"github.com/cogentcore/webgpu/wgpu"
)

// The ternary family — Q2_0 (group 64), the legacy group-128 Q2_0, PQ2_0
// and PTQ1_0 — is repacked at load into one layout that q2_matmul.wgsl
// reads: per row, 2-bit codes c (value (c−1)·d) 16 to a little-endian u32
// word, element e of a word in bits 2e…2e+1, and one f32 scale per group.
// PTQ1_0's base-3 trits become the same codes losslessly (t ∈ {0,1,2}),
// so one kernel serves every type at 2 bits a weight.

// twoBit reports whether t is repacked into 2-bit codes, and its group.
func twoBit(t gguf.Type) (group int, ok bool) {
	switch t {
	case gguf.Q2_0:
		return 64, true
	case gguf.Q2_0G128, gguf.PQ2_0, gguf.PTQ1_0:
		return 128, true
	}
	return 0, false
}

// twoBitChunk is a range of rows of a repacked matrix: codes (K/16 words a
// row) and scales (K/group a row).
type twoBitChunk struct {
	codes, scales *wgpu.Buffer
	row0, rows    int
}

// blockCodes decodes one block of type t into its scale and codes
// (len(codes) = group).
func blockCodes(t gguf.Type, blk []byte, codes []uint8) float32 {
	switch t {
	case gguf.PTQ1_0:
		// qs[0..15]: element 16n+m is trit n of qs[m]; qs[16..23]: element
		// 80+8n+m is trit n of qs[16+m]; qh[0..1]: element 120+2n+h is trit
		// n (< 4) of qh[h].
		for m := 0; m < 16; m++ {
			tritsOf(blk[m], 5, func(n int, tr uint8) { codes[16*n+m] = tr })
		}
		for m := 0; m < 8; m++ {
			tritsOf(blk[16+m], 5, func(n int, tr uint8) { codes[80+8*n+m] = tr })
		}
		for h := 0; h < 2; h++ {
			tritsOf(blk[24+h], 4, func(n int, tr uint8) { codes[120+2*n+h] = tr })
		}
		return quant.F16ToF32(binary.LittleEndian.Uint16(blk[26:]))
	default: // {f16 d; u8 qs[group/4]}, four codes a byte, LSB first
		for j := range codes {
			codes[j] = blk[2+j/4] >> (2 * (j % 4)) & 3
		}
		return quant.F16ToF32(binary.LittleEndian.Uint16(blk))
	}
}

// tritsOf calls f with the first count trits of a byte holding
// ceil(256·N/243) for N in base 3, most significant trit first: trit n is
// the top digit of (b·3ⁿ mod 256)·3 / 256.
func tritsOf(b byte, count int, f func(n int, t uint8)) {
	v := uint16(b)
	for n := 0; n < count; n++ {
		w := v * 3
		f(n, uint8(w>>8))
		v = w & 0xff
	}
}

// repackTwoBit fills w.twoBit from the file's blocks, in row chunks that
// each fit one storage binding.
func (w *weight) repackTwoBit(d *Device, rowBytes int) error {
	group, _ := twoBit(w.typ)
	if w.k%group != 0 {
		return fmt.Errorf("gpu: weight %s: rows of %d are not a multiple of %s's %d: %w", w.name, w.k, w.typ, group, ErrUnsupported)
	}
	blocks, words := w.k/group, w.k/16
	blockBytes := rowBytes / blocks
	maxRows := int(d.Limits.MaxStorageBufferBindingSize / uint64(4*words))
	maxRows -= maxRows % 8
	if maxRows < 8 {
		return fmt.Errorf("gpu: weight %s: rows of %d values exceed a storage binding: %w", w.name, w.k, ErrOutOfMemory)
	}
	codes := make([]uint8, group)
	for r0 := 0; r0 < w.m; r0 += maxRows {
		rows := min(maxRows, w.m-r0)
		cw := make([]byte, rows*words*4)
		sc := make([]byte, rows*blocks*4)
		for r := 0; r < rows; r++ {
			row := w.data[(r0+r)*rowBytes : (r0+r+1)*rowBytes]
			for bl := 0; bl < blocks; bl++ {
				s := blockCodes(w.typ, row[bl*blockBytes:(bl+1)*blockBytes], codes)
				binary.LittleEndian.PutUint32(sc[(r*blocks+bl)*4:], mathFloat32bits(s))
				for j, c := range codes {
					e := bl*group + j // element of the row
					cw[r*words*4+e/4] |= c << (2 * (e % 4))
				}
			}
		}
		cb, err := d.upload(fmt.Sprintf("%s.codes[%d]", w.name, r0), cw)
		if err != nil {
			return err
		}
		sb, err := d.upload(fmt.Sprintf("%s.scales[%d]", w.name, r0), sc)
		if err != nil {
			cb.Release()
			return err
		}
		w.twoBit = append(w.twoBit, twoBitChunk{codes: cb, scales: sb, row0: r0, rows: rows})
		w.bytes += int64(len(cw) + len(sc))
	}
	return nil
}

// twoBitRow dequantizes one row of a 2-bit type on the CPU (embedding
// lookups).
func twoBitRow(t gguf.Type, src []byte, dst []float32) error {
	group, _ := twoBit(t)
	blockBytes := len(src) / (len(dst) / group)
	codes := make([]uint8, group)
	for bl := 0; bl < len(dst)/group; bl++ {
		s := blockCodes(t, src[bl*blockBytes:(bl+1)*blockBytes], codes)
		for j, c := range codes {
			dst[bl*group+j] = (float32(c) - 1) * s
		}
	}
	return nil
}
