// Package toyrec is a recurrent network for tests of what infer.Model and
// the engine do with state that cannot be truncated. It is a tiny Qwen3 (the
// KV cache part) whose logits also depend, through a recurrent state the
// backend holds, on every token it has absorbed, in order:
//
//	h_0 = 0,  h_t = P·h_{t−1} + e(token_t)      (P a signed cyclic shift)
//	logits_i += Strength · u_i·h'/|h'|      (h' the first 16 values of h)
//
// e and u are fixed pseudo-random vectors. A state that belongs to other
// tokens, or to the same tokens at another position, changes the greedy
// continuation, so a test that compares continuations catches it.
//
// The architecture is registered as "toyrec" and its backend, the CPU
// backend plus that state, as "toyrec-cpu"; import the package for that
// side effect.
package toyrec

import (
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	_ "github.com/bonsai-chat/bonsai/infer/cpu" // the backend wraps the CPU's
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

const (
	// Arch is the toy's general.architecture.
	Arch = "toyrec"
	// Backend is the backend that runs it.
	Backend = "toyrec-cpu"
	// Strength scales the state's share of the logits: large enough to
	// decide the greedy token.
	Strength = 30
	// mixed is how many dimensions of h the logits read.
	mixed = 16
)

// Spec is the toy's recurrent state: 72 floats.
var Spec = infer.RecurrentSpec{Layers: 1, Channels: 8, ConvWidth: 2, VHeads: 1, HeadDim: 8}

func init() {
	infer.RegisterArch(infer.Architecture{
		Name:        Arch,
		Hyperparams: hyperparams,
		Build:       build,
	})
	infer.RegisterBackend(Backend, func(opts infer.BackendOptions) (infer.Backend, error) {
		cpu, err := infer.NewBackend("cpu", opts)
		if err != nil {
			return nil, err
		}
		return &backend{Backend: cpu}, nil
	})
}

// Config makes a tinymodel configuration a toy recurrent model (the keys
// stay qwen3's; only general.architecture changes).
func Config(cfg tinymodel.Config) tinymodel.Config {
	extra := map[string]any{"general.architecture": Arch}
	for k, v := range cfg.Extra {
		extra[k] = v
	}
	cfg.Extra = extra
	return cfg
}

func hyperparams(f *gguf.File) (infer.Hyperparams, error) {
	h, err := infer.ReadHyperparams(f, "qwen3")
	h.Arch = Arch
	return h, err
}

// backend holds the state beside the CPU backend's KV cache.
type backend struct {
	infer.Backend
	state  []float32
	allocs int // NewRecurrentState calls
}

// Allocations says how often NewRecurrentState ran on b (a backend of this
// package's), so tests can see that loading allocates the state once.
func Allocations(b infer.Backend) int {
	if tb, ok := b.(*backend); ok {
		return tb.allocs
	}
	return 0
}

func (b *backend) NewRecurrentState(spec infer.RecurrentSpec) error {
	if spec != Spec {
		return fmt.Errorf("%w: toyrec state %+v, want %+v", infer.ErrBadShape, spec, Spec)
	}
	b.state = make([]float32, spec.Floats())
	b.allocs++
	return nil
}

func (b *backend) ReadRecurrentState(dst []float32) error {
	if b.state == nil || len(dst) != len(b.state) {
		return fmt.Errorf("%w: reading %d floats of a state of %d", infer.ErrBadShape, len(dst), len(b.state))
	}
	copy(dst, b.state)
	return nil
}

func (b *backend) WriteRecurrentState(src []float32) error {
	if b.state == nil || len(src) != len(b.state) {
		return fmt.Errorf("%w: writing %d floats to a state of %d", infer.ErrBadShape, len(src), len(b.state))
	}
	copy(b.state, src)
	return nil
}

// advance absorbs the batch's tokens, from zero state at position 0 as
// every backend's recurrent layers do.
func (b *backend) advance(batch infer.Batch) error {
	if b.state == nil {
		return fmt.Errorf("%w: toyrec state not allocated", infer.ErrBadShape)
	}
	if batch.Pos == 0 {
		clear(b.state)
	}
	h := b.state
	for _, tok := range batch.Tokens {
		last := h[len(h)-1]
		copy(h[1:], h[:len(h)-1])
		h[0] = -last
		for j := range h {
			h[j] += hashed(uint64(tok), uint64(j))
		}
	}
	return nil
}

type network struct {
	infer.Network // the qwen3 part
	b             *backend
	u             [][mixed]float32 // per vocabulary id
}

func (n *network) RecurrentSpec() infer.RecurrentSpec { return Spec }

func build(f *gguf.File, b infer.Backend, cfg infer.BuildConfig) (infer.Network, error) {
	tb, ok := b.(*backend)
	if !ok {
		return nil, fmt.Errorf("%w: the toyrec architecture runs on the %s backend, not %s", infer.ErrUnsupportedOp, Backend, b.Name())
	}
	qwen3, err := infer.LookupArch("qwen3")
	if err != nil {
		return nil, err
	}
	inner, err := qwen3.Build(f, b, cfg)
	if err != nil {
		return nil, err
	}
	n := &network{Network: inner, b: tb, u: make([][mixed]float32, inner.Hyperparams().Vocab)}
	for i := range n.u {
		for j := range mixed {
			n.u[i][j] = hashed(uint64(i)+1<<40, uint64(j))
		}
	}
	return n, nil
}

func (n *network) Hyperparams() infer.Hyperparams {
	h := n.Network.Hyperparams()
	h.Arch = Arch
	return h
}

func (n *network) Forward(batch infer.Batch, logits []float32) error {
	if err := n.Network.Forward(batch, logits); err != nil {
		return err
	}
	if err := n.b.advance(batch); err != nil {
		return err
	}
	h := n.b.state
	var norm float64
	for _, v := range h[:mixed] {
		norm += float64(v) * float64(v)
	}
	if norm == 0 {
		return nil
	}
	scale := float32(Strength / math.Sqrt(norm))
	for i := range logits {
		var dot float32
		for j := range mixed {
			dot += n.u[i][j] * h[j]
		}
		logits[i] += scale * dot
	}
	return nil
}

// hashed is a fixed pseudo-random value in [−1, 1) for (a, b) (SplitMix64).
func hashed(a, b uint64) float32 {
	z := a*0x9e3779b97f4a7c15 + b*0xbf58476d1ce4e5b9 + 0x94d049bb133111eb
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float32(z>>40)/float32(1<<23) - 1
}
