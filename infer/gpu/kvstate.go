package gpu

import (
	"fmt"
	"io"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/cogentcore/webgpu/wgpu"
)

// Saving and restoring the KV cache's first positions (infer.KVStateIO), in
// the cache's own layout: per layer, K's rows of positions 0 … n−1 (each
// KVHeads·HeadDim f16 values; for a Q8_0 K their int8 words, then their
// scale words, kv_q8.wgsl), then V's, little-endian as the device stores
// them (store_kv.wgsl).

var _ infer.KVStateIO = (*Backend)(nil)

func (b *Backend) KVStateBytes(n int) int64 {
	if b.kv == nil {
		return 0
	}
	var sum uint64
	for _, c := range b.kvSides() {
		for _, r := range c.runs(n) {
			sum += r.size
		}
	}
	return int64(b.kv.spec.Layers) * int64(sum)
}

// kvSide is K's or V's buffer with its type.
type kvSide struct {
	buf  *wgpu.Buffer
	t    infer.KVType
	spec infer.KVSpec
}

func (b *Backend) kvSides() []kvSide {
	return []kvSide{{b.kv.k, b.kv.spec.K, b.kv.spec}, {b.kv.v, b.kv.spec.V, b.kv.spec}}
}

// byteRun is size bytes at offset off of a layer.
type byteRun struct{ off, size uint64 }

// runs are the byte runs of a layer holding positions 0 … n−1: f16 rows,
// or a Q8_0 side's int8 words and its scale words.
func (c kvSide) runs(n int) []byteRun {
	s := c.spec
	kvd := uint64(s.KVHeads * s.HeadDim)
	if c.t != infer.KVQ8_0 {
		return []byteRun{{0, uint64(n) * kvd * 2}}
	}
	srow := uint64(s.KVHeads*((s.HeadDim+63)/64)) * 4
	return []byteRun{{0, uint64(n) * kvd}, {uint64(s.Context) * kvd, uint64(n) * srow}}
}

// layerBytes is a layer's whole part of the side's buffer.
func (c kvSide) layerBytes() uint64 { return 4 * uint64(layerWords(c.spec, c.t)) }

// kvCheck checks n.
func (b *Backend) kvCheck(n int) error {
	if b.enc != nil {
		return fmt.Errorf("gpu: KV cache copied during a pass")
	}
	if b.kv == nil || n < 0 || n > b.kv.spec.Context {
		return fmt.Errorf("gpu: %d positions of the KV cache: %w", n, infer.ErrBadShape)
	}
	return nil
}

func (b *Backend) SaveKV(w io.Writer, n int) error {
	if err := b.kvCheck(n); err != nil || n == 0 {
		return err
	}
	var most uint64
	for _, c := range b.kvSides() {
		for _, r := range c.runs(n) {
			most = max(most, r.size)
		}
	}
	staging, err := b.d.newBuffer("kv state read", most, readUsage)
	if err != nil {
		return err
	}
	defer staging.Release()
	for l := range b.kv.spec.Layers {
		for _, c := range b.kvSides() {
			for _, r := range c.runs(n) {
				if err := b.saveRun(w, staging, c.buf, uint64(l)*c.layerBytes()+r.off, r.size); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// saveRun writes size bytes of src at off to w through staging.
func (b *Backend) saveRun(w io.Writer, staging, src *wgpu.Buffer, off, size uint64) error {
	enc, err := b.d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return fmt.Errorf("gpu: %w: %w", ErrDeviceLost, err)
	}
	if err := enc.CopyBufferToBuffer(src, off, staging, 0, size); err != nil {
		enc.Release()
		return fmt.Errorf("gpu: copying the KV cache: %w", err)
	}
	cmd, err := enc.Finish(nil)
	enc.Release()
	if err != nil {
		return fmt.Errorf("gpu: copying the KV cache: %w", err)
	}
	b.d.queue.Submit(cmd)
	cmd.Release()
	if err := waitIdle(b.d.dev); err != nil {
		return err
	}
	buf := make([]byte, size)
	if err := readBuffer(b.d.dev, staging, 0, buf); err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}

func (b *Backend) LoadKV(r io.Reader, n int) error {
	if err := b.kvCheck(n); err != nil || n == 0 {
		return err
	}
	for l := range b.kv.spec.Layers {
		for _, c := range b.kvSides() {
			for _, run := range c.runs(n) {
				buf := make([]byte, run.size)
				if _, err := io.ReadFull(r, buf); err != nil {
					return err
				}
				if err := b.d.queue.WriteBuffer(c.buf, uint64(l)*c.layerBytes()+run.off, buf); err != nil {
					return fmt.Errorf("gpu: writing the KV cache: %w", err)
				}
			}
		}
	}
	b.d.queue.Submit()
	return waitIdle(b.d.dev)
}
