package infer

import (
	"fmt"
	"sort"
	"sync"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Architecture is one model family, keyed by general.architecture. Adding
// one (qwen35) is one file that calls RegisterArch from init.
type Architecture struct {
	Name string
	// Hyperparams reads the sizes from the file without binding anything
	// (for `bonsai info` and memory estimates).
	Hyperparams func(f *gguf.File) (Hyperparams, error)
	// State, if set, sizes the KV cache for ctx tokens and the recurrent
	// state without binding anything (memory estimates); nil means a dense
	// transformer with K and V in every layer.
	State func(f *gguf.File, ctx int) (KVSpec, RecurrentSpec, error)
	// Build binds the weights of f on b and allocates activations for
	// batches of up to cfg.MaxBatch tokens.
	Build func(f *gguf.File, b Backend, cfg BuildConfig) (Network, error)
}

// BuildConfig is what an architecture needs to set a network up.
type BuildConfig struct {
	MaxBatch int
	// Progress, if set, is called after each bound weight with the bytes
	// bound so far and in all.
	Progress func(done, total int64)
}

// Network is a built model on a backend: it runs forward passes.
type Network interface {
	Hyperparams() Hyperparams
	// KVSpec sizes the KV cache for a context of n tokens.
	KVSpec(n int) KVSpec
	// Forward runs one pass over batch (at most MaxBatch tokens, positions
	// within the KV cache) and writes the logits of the batch's last token
	// into logits (len Vocab).
	Forward(batch Batch, logits []float32) error
}

// RecurrentNetwork is a Network with recurrent layers (qwen35's Gated
// DeltaNet) whose state the backend holds beside the KV cache (see
// HybridOps). Its KVSpec counts only the attention layers.
type RecurrentNetwork interface {
	Network
	RecurrentSpec() RecurrentSpec
}

var (
	archMu sync.Mutex
	archs  = map[string]Architecture{}
)

// RegisterArch adds an architecture; a second registration of the same
// name replaces the first.
func RegisterArch(a Architecture) {
	archMu.Lock()
	defer archMu.Unlock()
	archs[a.Name] = a
}

// LookupArch returns the architecture that general.architecture names, or an
// error wrapping ErrUnsupportedArch.
func LookupArch(name string) (Architecture, error) {
	archMu.Lock()
	defer archMu.Unlock()
	a, ok := archs[name]
	if !ok {
		known := make([]string, 0, len(archs))
		for n := range archs {
			known = append(known, n)
		}
		sort.Strings(known)
		return Architecture{}, fmt.Errorf("%w %q (supported: %v)", ErrUnsupportedArch, name, known)
	}
	return a, nil
}

// ArchOf reads general.architecture.
func ArchOf(f *gguf.File) (string, error) {
	name, ok := f.KV.String("general.architecture")
	if !ok {
		return "", fmt.Errorf("%w: general.architecture", gguf.ErrNoKey)
	}
	return name, nil
}
