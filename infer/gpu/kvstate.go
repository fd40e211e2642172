package gpu

import (
	"fmt"
	"io"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/cogentcore/webgpu/wgpu"
)

// Saving and restoring the KV cache's first positions (infer.KVStateIO), in
// the cache's own layout: per layer, K's rows of positions 0 … n−1 (each
// KVHeads·HeadDim f16 values), then V's, little-endian as the device
// stores them (store_kv.wgsl).

var _ infer.KVStateIO = (*Backend)(nil)

func (b *Backend) KVStateBytes(n int) int64 {
	if b.kv == nil {
		return 0
	}
	s := b.kv.spec
	return 2 * int64(s.Layers) * int64(n) * int64(s.KVHeads*s.HeadDim) * 2
}

// kvRun checks n and returns the bytes of one layer's n rows of K (or V)
// and of a layer's whole cache.
func (b *Backend) kvRun(n int) (run, layer uint64, err error) {
	if b.enc != nil {
		return 0, 0, fmt.Errorf("gpu: KV cache copied during a pass")
	}
	if b.kv == nil || n < 0 || n > b.kv.spec.Context {
		return 0, 0, fmt.Errorf("gpu: %d positions of the KV cache: %w", n, infer.ErrBadShape)
	}
	s := b.kv.spec
	row := uint64(s.KVHeads*s.HeadDim) * 2
	return uint64(n) * row, uint64(s.Context) * row, nil
}

func (b *Backend) SaveKV(w io.Writer, n int) error {
	run, layer, err := b.kvRun(n)
	if err != nil || run == 0 {
		return err
	}
	staging, err := b.d.newBuffer("kv state read", run, readUsage)
	if err != nil {
		return err
	}
	defer staging.Release()
	buf := make([]byte, run)
	for l := range b.kv.spec.Layers {
		for _, src := range []*wgpu.Buffer{b.kv.k, b.kv.v} {
			enc, err := b.d.dev.CreateCommandEncoder(nil)
			if err != nil {
				return fmt.Errorf("gpu: %w: %w", ErrDeviceLost, err)
			}
			if err := enc.CopyBufferToBuffer(src, uint64(l)*layer, staging, 0, run); err != nil {
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
			if err := readBuffer(b.d.dev, staging, 0, buf); err != nil {
				return err
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Backend) LoadKV(r io.Reader, n int) error {
	run, layer, err := b.kvRun(n)
	if err != nil || run == 0 {
		return err
	}
	buf := make([]byte, run)
	for l := range b.kv.spec.Layers {
		for _, cache := range []*wgpu.Buffer{b.kv.k, b.kv.v} {
			if _, err := io.ReadFull(r, buf); err != nil {
				return err
			}
			if err := b.d.queue.WriteBuffer(cache, uint64(l)*layer, buf); err != nil {
				return fmt.Errorf("gpu: writing the KV cache: %w", err)
			}
		}
	}
	b.d.queue.Submit()
	return waitIdle(b.d.dev)
}
