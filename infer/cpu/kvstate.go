package cpu

import (
	"encoding/binary"
	"fmt"
	"io"
	"unsafe"

	"github.com/bonsai-chat/bonsai/infer"
)

// Saving and restoring the KV cache's first positions (infer.KVStateIO), in
// the cache's own layout trimmed to them: per layer, each head's keys of
// positions 0 … n−1, then its values. An f16 K is one run of n·HeadDim
// halves per head and an f16 V HeadDim runs of n (one per dimension); a
// q8_0 K or V is one run of n rows of Q8_0 blocks per head. Halves are
// little-endian.

var _ infer.KVStateIO = (*Backend)(nil)

func (b *Backend) KVStateBytes(n int) int64 {
	c := &b.kv
	s := c.spec
	per := func(quantized bool, row int) int64 {
		if quantized {
			return int64(row)
		}
		return 2 * int64(s.HeadDim)
	}
	return int64(s.Layers) * int64(s.KVHeads) * int64(n) * (per(c.kq != nil, c.kRow) + per(c.vq != nil, c.vRow))
}

// kvRuns calls half with each f16 run of the cache that holds positions
// 0 … n−1, and bytes with each quantized one, in the saved order.
func (b *Backend) kvRuns(n int, half func([]uint16) error, bytes func([]byte) error) error {
	c := &b.kv
	s := c.spec
	if b.inPass {
		return fmt.Errorf("cpu backend: KV cache copied during a pass")
	}
	if n < 0 || n > s.Context || c.k == nil && c.kq == nil {
		return fmt.Errorf("%w: %d positions of a KV cache of %d", infer.ErrBadShape, n, s.Context)
	}
	for l := range s.Layers {
		for g := range s.KVHeads {
			var err error
			if c.kq != nil {
				err = bytes(c.kq[l][g*s.Context*c.kRow:][:n*c.kRow])
			} else {
				err = half(c.kHead(l, g, 0)[:n*s.HeadDim])
			}
			if err != nil {
				return err
			}
		}
		for g := range s.KVHeads {
			if c.vq != nil {
				if err := bytes(c.vq[l][g*s.Context*c.vRow:][:n*c.vRow]); err != nil {
					return err
				}
				continue
			}
			v := c.vHead(l, g, 0)
			for d := range s.HeadDim {
				if err := half(v[d*c.vStride : d*c.vStride+n]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (b *Backend) SaveKV(w io.Writer, n int) error {
	write := func(p []byte) error { _, err := w.Write(p); return err }
	return b.kvRuns(n, func(run []uint16) error {
		if littleEndian {
			return write(u16Bytes(run))
		}
		return binary.Write(w, binary.LittleEndian, run)
	}, write)
}

func (b *Backend) LoadKV(r io.Reader, n int) error {
	read := func(p []byte) error { _, err := io.ReadFull(r, p); return err }
	return b.kvRuns(n, func(run []uint16) error {
		if littleEndian {
			return read(u16Bytes(run))
		}
		return binary.Read(r, binary.LittleEndian, run)
	}, read)
}

// u16Bytes is s's memory as bytes (the host's byte order).
func u16Bytes(s []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
}

// littleEndian says the host stores a uint16's low byte first, so that the
// cache's memory is already the saved layout.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
