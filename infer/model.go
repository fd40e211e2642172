package infer

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Defaults for Options' zero values.
const (
	// DefaultContext is the KV cache size when Options.Context is 0 (capped
	// by the model's training context).
	DefaultContext = 4096
	// DefaultBatch is the most prompt tokens per forward pass (llama.cpp's
	// default ubatch).
	DefaultBatch = 512
)

// Options configure Load.
type Options struct {
	Backend string // "cpu", "gpu" or "auto" ("" = auto)
	Threads int    // CPU threads; 0: one per core
	Context int    // KV cache positions; 0: DefaultContext capped by the model
	Batch   int    // prompt tokens per pass; 0: DefaultBatch
	Profile bool   // time the phases from the start
	Adapter string // GPU adapter choice (BackendOptions.Adapter)
	// Progress, if set, reports loading: bytes of weights bound so far.
	Progress func(done, total int64)
}

// Model is a loaded model on a backend with its KV cache. It is not safe for
// concurrent use: the engine goroutine owns it.
type Model struct {
	File    *gguf.File
	Hparams Hyperparams
	Variant Variant

	backend  Backend
	net      Network
	context  int
	maxBatch int
	logits   []float32
}

// Load builds the model of f on the backend opts names. The file must stay
// open while the model is in use; Close the model before the file.
func Load(f *gguf.File, opts Options) (*Model, error) {
	archName, err := ArchOf(f)
	if err != nil {
		return nil, err
	}
	arch, err := LookupArch(archName)
	if err != nil {
		return nil, err
	}
	hp, err := arch.Hyperparams(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", archName, err)
	}
	ctx := opts.Context
	if ctx == 0 {
		ctx = min(DefaultContext, hp.ContextTrain)
	}
	if ctx < 1 {
		return nil, fmt.Errorf("%w: context %d", ErrBadShape, ctx)
	}
	if err := checkFile(f, hp, ctx, opts.Threads); err != nil {
		return nil, err
	}
	batch := opts.Batch
	if batch == 0 {
		batch = DefaultBatch
	}
	if batch < 1 {
		return nil, fmt.Errorf("%w: batch %d", ErrBadShape, batch)
	}
	batch = min(batch, ctx)

	m := &Model{
		File:     f,
		Hparams:  hp,
		Variant:  DetectVariant(f),
		context:  ctx,
		maxBatch: batch,
		logits:   make([]float32, hp.Vocab),
	}
	bopts := BackendOptions{Threads: opts.Threads, Profile: opts.Profile, Adapter: opts.Adapter}
	if opts.Backend == "" || opts.Backend == "auto" {
		// "auto" promises a working backend: the GPU if it loads and runs
		// this model, else the CPU.
		gpu := bopts
		gpu.Auto = true
		gerr := m.build(arch, "gpu", gpu, opts.Progress)
		if gerr == nil {
			return m, nil
		}
		if err := m.build(arch, "cpu", bopts, opts.Progress); err != nil {
			return nil, fmt.Errorf("on the GPU: %w; on the CPU: %w", gerr, err)
		}
		return m, nil
	}
	if err := m.build(arch, opts.Backend, bopts, opts.Progress); err != nil {
		return nil, err
	}
	return m, nil
}

// build sets the model up on the named backend and runs one token through
// it, so that a backend that cannot run this model (a shape its kernels do
// not handle) says so now rather than at the first prompt. The token leaves
// nothing behind: the cache is overwritten from position 0 by the first
// real pass.
func (m *Model) build(arch Architecture, name string, bopts BackendOptions, progress func(done, total int64)) error {
	if name == "cpu" {
		if err := checkHostMemory(m.Hparams, m.context, m.maxBatch, bopts.Threads); err != nil {
			return err
		}
	}
	b, err := NewBackend(name, bopts)
	if err != nil {
		return err
	}
	net, err := arch.Build(m.File, b, BuildConfig{MaxBatch: m.maxBatch, Progress: progress})
	if err == nil {
		err = b.NewKVCache(net.KVSpec(m.context))
		if err != nil {
			err = fmt.Errorf("KV cache for %d tokens: %w", m.context, err)
		}
	}
	if err == nil {
		err = net.Forward(Batch{Tokens: []int32{0}, Pos: 0}, m.logits)
		if err == nil {
			err = checkLogits(m.logits, m.Hparams)
		}
		if err != nil {
			err = fmt.Errorf("%s backend: trial pass: %w", name, err)
		}
	}
	if err != nil {
		b.Close()
		return err
	}
	if bopts.Profile {
		b.TakeProfile() // the trial pass is not the user's
	}
	m.backend, m.net = b, net
	return nil
}

// Forward runs tokens at positions pos, pos+1, … through the model (in
// batches of at most Options.Batch) and leaves the last token's logits in
// Logits. The KV cache keeps positions below pos as they are, so a prompt
// that shares a cached prefix only runs what follows it. It fails with
// ErrContextFull when pos+len(tokens) exceeds the context.
func (m *Model) Forward(tokens []int32, pos int) error {
	if len(tokens) == 0 {
		return fmt.Errorf("%w: no tokens to run", ErrBadShape)
	}
	if pos < 0 || pos+len(tokens) > m.context {
		return fmt.Errorf("%w: %d tokens at position %d exceed the context of %d", ErrContextFull, len(tokens), pos, m.context)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= m.Hparams.Vocab {
			return fmt.Errorf("%w: token id %d outside the vocabulary of %d", ErrBadShape, id, m.Hparams.Vocab)
		}
	}
	for start := 0; start < len(tokens); start += m.maxBatch {
		end := min(start+m.maxBatch, len(tokens))
		if err := m.net.Forward(Batch{Tokens: tokens[start:end], Pos: pos + start}, m.logits); err != nil {
			return err
		}
	}
	return nil
}

// Logits are the next-token logits after the last Forward (len Vocab). The
// slice is reused by the next Forward.
func (m *Model) Logits() []float32 { return m.logits }

// Context is the KV cache size in tokens.
func (m *Model) Context() int { return m.context }

// MaxBatch is the most tokens one pass runs.
func (m *Model) MaxBatch() int { return m.maxBatch }

// Backend is the backend the model runs on.
func (m *Model) Backend() Backend { return m.backend }

// KVSpec is the allocated KV cache's shape.
func (m *Model) KVSpec() KVSpec { return m.net.KVSpec(m.context) }

// Close releases the backend (device memory, bindings). It does not close
// the file.
func (m *Model) Close() error {
	if m.backend == nil {
		return nil
	}
	err := m.backend.Close()
	m.backend = nil
	return err
}
