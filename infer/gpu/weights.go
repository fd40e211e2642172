package gpu

import (
	"encoding/binary"
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
	"github.com/cogentcore/webgpu/wgpu"
)

// weight is a model tensor on the device. Q1_0 matrices are repacked into
// sign words and f32 scales, the 2-bit family into codes, Q8_0, Q4_0 and
// Q4_K–Q6_K matrices keep the file's blocks (qblock.go); every other type
// (and a vector of those) is dequantized to f32 at load (32/bits times the
// memory), split into row chunks that each fit one storage binding.
type weight struct {
	name  string
	typ   gguf.Type
	shape []int64
	k, m  int // ne0 (inputs) and rows
	// layout is the type's row of the kernel table (layouts.go)
	layout *layout

	// Q1_0: spans of the sign-word and scale arenas, placed (and the host
	// copies dropped) when the first pass begins, in load order, so that
	// matrices loaded one after another (q, k, v; gate, up) are adjacent
	// and one dispatch can serve them all.
	bits, scales         span
	hostBits, hostScales []byte
	// interleaved: block-interleaved rather than row-major (repackQ1)
	interleaved bool
	// the ternary family: 2-bit codes and f32 scales, chunked (twobit.go)
	twoBit []twoBitChunk
	// Q8_0, Q4_0, Q4_K, Q5_K, Q6_K matrices: the file's blocks, chunked
	blocks []blockChunk
	// everything else: dense f32 rows, chunked
	chunks []f32Chunk

	data  []byte // the file's bytes (valid until Close): CPU-side embedding rows
	bytes int64  // device bytes
}

// span is a byte range of a device buffer.
type span struct {
	buf       *wgpu.Buffer
	off, size uint64
}

func (s span) binding() binding { return binding{buf: s.buf, offset: s.off, size: s.size} }

// follows reports whether s starts where prev ends, in the same buffer.
func (s span) follows(prev span) bool { return s.buf == prev.buf && s.off == prev.off+prev.size }

type f32Chunk struct {
	buf  *wgpu.Buffer
	row0 int
	rows int
}

func (w *weight) Name() string    { return w.name }
func (w *weight) Type() gguf.Type { return w.typ }
func (w *weight) Shape() []int64  { return w.shape }
func (w *weight) q1() bool        { return w.typ == gguf.Q1_0 }
func (w *weight) release() {
	for _, c := range w.chunks {
		c.buf.Release()
	}
	for _, c := range w.twoBit {
		c.codes.Release()
		c.scales.Release()
	}
	for _, c := range w.blocks {
		c.buf.Release()
	}
}

func loadWeight(d *Device, wd infer.WeightData) (*weight, error) {
	if len(wd.Shape) == 0 || len(wd.Shape) > 2 {
		return nil, fmt.Errorf("gpu: weight %s: %d dimensions: %w", wd.Name, len(wd.Shape), infer.ErrBadShape)
	}
	k := int(wd.Shape[0])
	m := 1
	if len(wd.Shape) == 2 {
		m = int(wd.Shape[1])
	}
	if k <= 0 || m <= 0 {
		return nil, fmt.Errorf("gpu: weight %s: shape %v: %w", wd.Name, wd.Shape, infer.ErrBadShape)
	}
	l := layoutOf(wd.Type)
	if l == nil {
		return nil, fmt.Errorf("gpu: weight %s: %w %s", wd.Name, infer.ErrUnsupportedType, wd.Type)
	}
	rowBytes, err := wd.Type.RowBytes(int64(k))
	if err != nil {
		return nil, fmt.Errorf("gpu: weight %s: %w: %w", wd.Name, infer.ErrBadShape, err)
	}
	if int64(len(wd.Data)) != rowBytes*int64(m) {
		return nil, fmt.Errorf("gpu: weight %s: %d bytes, want %d for %s %v: %w",
			wd.Name, len(wd.Data), rowBytes*int64(m), wd.Type, wd.Shape, infer.ErrBadShape)
	}
	w := &weight{name: wd.Name, typ: wd.Type, shape: append([]int64(nil), wd.Shape...), k: k, m: m, layout: l, data: wd.Data}
	if err := l.load(w, d, int(rowBytes)); err != nil {
		w.release()
		return nil, err
	}
	return w, nil
}

// repackQ1 splits 18-byte blocks {f16 d; u8 qs[16]} into the sign words
// (qs read as 4 little-endian u32: bit i of word j is weight 32j+i) and
// the scales as f32, row-major or block-interleaved (block b of row r at
// b·m + r, so that the threads of neighbouring rows read neighbouring
// 16-byte chunks); shaders/q1_layout.wgsli addresses both.
func (w *weight) repackQ1(d *Device, rowBytes int) error {
	// Every Q1_0 matrix is block-interleaved for the decode matvecs
	// q1_w1 and q1_xq (one row per thread), the default on every shape now
	// that activations are rounded once by their producer; the other
	// kernels address both layouts.
	w.interleaved = true
	blocks := w.k / 128
	bits := make([]byte, w.m*blocks*16)
	scales := make([]byte, w.m*blocks*4)
	for r := 0; r < w.m; r++ {
		row := w.data[r*rowBytes : (r+1)*rowBytes]
		for b := 0; b < blocks; b++ {
			blk := row[b*18 : b*18+18]
			at := r*blocks + b
			if w.interleaved {
				at = b*w.m + r
			}
			copy(bits[at*16:], blk[2:18])
			s := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
			binary.LittleEndian.PutUint32(scales[at*4:], mathFloat32bits(s))
		}
	}
	w.hostBits, w.hostScales = bits, scales
	w.bytes = int64(len(bits) + len(scales))
	return nil
}

// dequantize expands the rows to f32 in chunks that each fit a storage
// binding (lavapipe allows 128 MiB; a tied Qwen vocab of 151936 rows is
// larger than that at f32).
func (w *weight) dequantize(d *Device, rowBytes int) error {
	maxRows := int(d.Limits.MaxStorageBufferBindingSize / uint64(4*w.k))
	maxRows -= maxRows % 8
	if maxRows < 8 {
		return fmt.Errorf("gpu: weight %s: rows of %d values exceed a storage binding: %w", w.name, w.k, ErrOutOfMemory)
	}
	row := make([]float32, w.k)
	for r0 := 0; r0 < w.m; r0 += maxRows {
		rows := min(maxRows, w.m-r0)
		buf := make([]byte, rows*w.k*4)
		for r := 0; r < rows; r++ {
			src := w.data[(r0+r)*rowBytes : (r0+r+1)*rowBytes]
			if err := quant.DequantizeRow(w.typ, src, row); err != nil {
				return fmt.Errorf("gpu: weight %s row %d: %w", w.name, r0+r, err)
			}
			for j, v := range row {
				binary.LittleEndian.PutUint32(buf[(r*w.k+j)*4:], mathFloat32bits(v))
			}
		}
		b, err := d.upload(fmt.Sprintf("%s.f32[%d]", w.name, r0), buf)
		if err != nil {
			return err
		}
		w.chunks = append(w.chunks, f32Chunk{buf: b, row0: r0, rows: rows})
		w.bytes += int64(len(buf))
	}
	return nil
}

// embedRows dequantizes rows tokens of w on the CPU into dst (len(tokens)·k).
func (w *weight) embedRows(tokens []int32, dst []byte) error {
	rowBytes, err := w.typ.RowBytes(int64(w.k))
	if err != nil {
		return err
	}
	row := make([]float32, w.k)
	for i, t := range tokens {
		if t < 0 || int(t) >= w.m {
			return fmt.Errorf("gpu: token %d outside the vocabulary of %d: %w", t, w.m, infer.ErrBadShape)
		}
		src := w.data[int64(t)*rowBytes : int64(t+1)*rowBytes]
		if err := w.layout.row(w.typ, src, row); err != nil {
			return err
		}
		for j, v := range row {
			binary.LittleEndian.PutUint32(dst[(i*w.k+j)*4:], mathFloat32bits(v))
		}
	}
	return nil
}

// arenas place the Q1_0 weights waiting for the device into buffers of at
// most one storage binding each, in load order, and upload them.
func placeQ1(d *Device, ws []*weight) ([]*wgpu.Buffer, error) {
	align := uint64(max(256, d.Limits.MinStorageBufferOffsetAlignment))
	limit := d.Limits.MaxStorageBufferBindingSize
	var bufs []*wgpu.Buffer
	place := func(label string, data func(*weight) []byte, set func(*weight, span)) error {
		start := 0
		for start < len(ws) {
			// take weights while they fit one binding
			var size uint64
			end := start
			for end < len(ws) {
				n := uint64(len(data(ws[end])))
				if n > limit {
					return fmt.Errorf("gpu: weight %s: %d MiB of %s exceeds the %d MiB storage binding: %w",
						ws[end].name, n>>20, label, limit>>20, ErrOutOfMemory)
				}
				padded := (n + align - 1) / align * align
				if size+n > limit {
					break
				}
				size += padded
				end++
			}
			buf, err := d.newBuffer(label, size, storageUsage)
			if err != nil {
				return err
			}
			bufs = append(bufs, buf)
			var off uint64
			for _, w := range ws[start:end] {
				b := data(w)
				n := uint64(len(b))
				if err := d.queue.WriteBuffer(buf, off, b); err != nil {
					return fmt.Errorf("gpu: uploading %s: %w", w.name, err)
				}
				set(w, span{buf: buf, off: off, size: n})
				off += (n + align - 1) / align * align
			}
			start = end
		}
		return nil
	}
	if err := place("q1 sign words", func(w *weight) []byte { return w.hostBits }, func(w *weight, s span) { w.bits = s }); err != nil {
		return bufs, err
	}
	if err := place("q1 scales", func(w *weight) []byte { return w.hostScales }, func(w *weight, s span) { w.scales = s }); err != nil {
		return bufs, err
	}
	for _, w := range ws {
		w.hostBits, w.hostScales = nil, nil
	}
	return bufs, nil
}
