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
// positions 0 … n−1 (one run of n·HeadDim values), then each head's value
// dimensions over those positions (HeadDim runs of n values). Values are
// f16, little-endian.

var _ infer.KVStateIO = (*Backend)(nil)

func (b *Backend) KVStateBytes(n int) int64 {
	s := b.kv.spec
	return 2 * 2 * int64(s.Layers) * int64(s.KVHeads) * int64(s.HeadDim) * int64(n)
}

// kvRuns calls f with each run of the cache that holds positions 0 … n−1,
// in the saved order.
func (b *Backend) kvRuns(n int, f func([]uint16) error) error {
	c := &b.kv
	s := c.spec
	if b.inPass {
		return fmt.Errorf("cpu backend: KV cache copied during a pass")
	}
	if n < 0 || n > s.Context || c.k == nil {
		return fmt.Errorf("%w: %d positions of a KV cache of %d", infer.ErrBadShape, n, s.Context)
	}
	for l := range s.Layers {
		for g := range s.KVHeads {
			if err := f(c.kHead(l, g, 0)[:n*s.HeadDim]); err != nil {
				return err
			}
		}
		for g := range s.KVHeads {
			v := c.vHead(l, g, 0)
			for d := range s.HeadDim {
				if err := f(v[d*c.vStride : d*c.vStride+n]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (b *Backend) SaveKV(w io.Writer, n int) error {
	return b.kvRuns(n, func(run []uint16) error {
		if littleEndian {
			_, err := w.Write(u16Bytes(run))
			return err
		}
		return binary.Write(w, binary.LittleEndian, run)
	})
}

func (b *Backend) LoadKV(r io.Reader, n int) error {
	return b.kvRuns(n, func(run []uint16) error {
		if littleEndian {
			_, err := io.ReadFull(r, u16Bytes(run))
			return err
		}
		return binary.Read(r, binary.LittleEndian, run)
	})
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
