package infer

import (
	"fmt"
	"slices"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/sample"
)

// ContextFor is the context a model loads with when asked for ctx tokens:
// ctx itself, or for 0 DefaultContext capped by what the model was trained
// on. The chat, run, serve and info all size the context by this one rule.
func ContextFor(ctx int, hp Hyperparams) int {
	if ctx == 0 {
		return min(DefaultContext, hp.ContextTrain)
	}
	return ctx
}

// Defaults for Options' zero values.
const (
	// DefaultContext is the KV cache size when Options.Context is 0 (capped
	// by the model's training context).
	DefaultContext = 4096
	// DefaultBatch is the most prompt tokens per forward pass (llama.cpp's
	// default ubatch).
	DefaultBatch = 512
	// DefaultSnapshots is how many recurrent-state snapshots a recurrent
	// model keeps when Options.Snapshots is 0: enough for the last turn
	// boundaries that regenerate and edit go back to.
	DefaultSnapshots = 4
	// SnapshotBudget caps the host memory of those snapshots (a 27B qwen35
	// state is about 150 MiB), however many Options.Snapshots asks for;
	// at least one snapshot is always kept.
	SnapshotBudget = 1 << 30
)

// Options configure Load.
type Options struct {
	Backend string  // "cpu", "gpu" or "auto" ("" = auto)
	Threads int     // CPU threads; 0: one per core
	Context int     // KV cache positions; 0: DefaultContext capped by the model
	KV      KVTypes // the KV cache's types; zero: f16 K and V
	Batch   int     // prompt tokens per pass; 0: DefaultBatch
	Profile bool    // time the phases from the start
	Adapter string  // GPU adapter choice (BackendOptions.Adapter)
	GPU     GPUOptions
	// Snapshots is how many recurrent-state snapshots to keep (recurrent
	// networks only); 0: DefaultSnapshots, negative: none.
	Snapshots int
	// Progress, if set, reports loading: bytes of weights bound so far.
	Progress func(done, total int64)
}

// Model is a loaded model on a backend with its KV cache. It is not safe for
// concurrent use: the engine goroutine owns it.
//
// A recurrent network's state (RecurrentNetwork) cannot be truncated as the
// KV cache can: it belongs to one position, the number of tokens it has
// absorbed. The Model tracks that position (StatePos) and keeps a few host
// snapshots of the state (Checkpoint), so that Forward at an earlier
// position restores the snapshot taken exactly there, and fails with
// ErrStateMismatch when there is none, rather than continue from a state
// that belongs to other tokens. A network without recurrent layers pays
// nothing for this.
type Model struct {
	File    *gguf.File
	Hparams Hyperparams
	Variant Variant
	// Fallback is why "auto" did not take the GPU (nil when it did, or
	// when a backend was named).
	Fallback error
	// Notes are what the user should be told about this load (a context
	// beyond the model's training), one sentence each.
	Notes []string

	backend  Backend
	net      Network
	context  int
	kvTypes  KVTypes
	maxBatch int
	logits   []float32

	rspec     RecurrentSpec // zero for a network without recurrent layers
	statePos  int           // the position the backend's recurrent state belongs to; −1: none
	seqs      int           // recurrent states kept for passes over rows (UseSequences)
	snaps     []snapshot    // ascending positions
	maxSnaps  int           // snapshots kept (snapshotLimit of wantSnaps)
	wantSnaps int           // Options.Snapshots
	// rows holds a verify pass's logits (verify.go): one buffer for the
	// model's sequences, grown rarely, since fresh pages cost more than
	// the pass on a busy machine.
	rows     []float32
	verified int // the largest verify pass run so far (VerifiedRows)
}

// snapshot is a host copy of the recurrent state after the first pos tokens.
type snapshot struct {
	pos   int
	state []float32
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
	ctx := ContextFor(opts.Context, hp)
	if ctx < 1 {
		return nil, fmt.Errorf("%w: context %d", ErrBadShape, ctx)
	}
	if err := checkFile(f, hp, ctx, opts.Threads); err != nil {
		return nil, err
	}
	if err := opts.KV.check(hp.HeadDim); err != nil {
		return nil, err
	}
	if err := checkFinite(f); err != nil {
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
		File:      f,
		Hparams:   hp,
		Variant:   DetectVariant(f),
		context:   ctx,
		kvTypes:   opts.KV,
		maxBatch:  batch,
		logits:    make([]float32, hp.Vocab),
		statePos:  -1,
		wantSnaps: opts.Snapshots,
	}
	if note := contextNote(hp, ctx); note != "" {
		m.Notes = append(m.Notes, note)
	}
	bopts := BackendOptions{Threads: opts.Threads, Profile: opts.Profile, Adapter: opts.Adapter, GPU: opts.GPU}
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
		m.Fallback = gerr
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
		if kv := net.KVSpec(m.context).Context; kv < m.context {
			// The network cannot run past kv positions (gemma3's
			// sliding window): the model's context is that.
			m.Notes = append(m.Notes, fmt.Sprintf("context %d capped at the %d positions this architecture runs", m.context, kv))
			m.context, m.maxBatch = kv, min(m.maxBatch, kv)
		}
		err = b.NewKVCache(m.kvSpec(net))
		if err != nil {
			err = fmt.Errorf("KV cache for %d tokens: %w", m.context, err)
		}
	}
	if rn, ok := net.(RecurrentNetwork); ok && err == nil {
		if err = b.NewRecurrentState(rn.RecurrentSpec()); err != nil {
			err = fmt.Errorf("recurrent state: %w", err)
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
	m.backend, m.net = b, net
	m.rspec, m.statePos, m.snaps, m.maxSnaps, m.seqs = RecurrentSpec{}, -1, nil, 0, 1
	if rn, ok := net.(RecurrentNetwork); ok && rn.RecurrentSpec().Floats() > 0 {
		m.rspec = rn.RecurrentSpec()
		m.maxSnaps = snapshotLimit(m.rspec, m.wantSnaps)
	}
	if w, ok := b.(Warming); ok {
		if err := m.warm(w.WarmBatches(), w.WarmPositions()); err != nil {
			m.backend, m.net = nil, nil
			b.Close()
			return fmt.Errorf("%s backend: warm-up: %w", name, err)
		}
	}
	if bopts.Profile {
		b.TakeProfile() // the trial and warm-up passes are not the user's
	}
	return nil
}

// warm runs prompt passes of batches tokens (those the largest batch and
// the context take), one-token passes at positions (those inside the
// context) and, where the model
// chains, a short greedy chain at each position and a short sampled one
// (with sample.Bonsai's top-k, bonsai's default: another k compiles its
// own top-k on first use), creating what prompts and decoding will use.
// Like the trial pass it leaves nothing behind: the cache is written from
// position 0 by the first real pass, and a recurrent state restarts there
// (statePos stays -1).
func (m *Model) warm(batches, positions []int) error {
	for _, n := range batches {
		if n < 2 || n > m.maxBatch || n > m.context {
			continue
		}
		if err := m.net.Forward(Batch{Tokens: make([]int32, n), Pos: 0}, m.logits); err != nil {
			return err
		}
	}
	s := NewSequence(m)
	for _, p := range append([]int{1}, positions...) {
		if p <= 0 || p+3 > m.context {
			continue
		}
		if err := m.net.Forward(Batch{Tokens: []int32{0}, Pos: p}, m.logits); err != nil {
			return err
		}
		if err := warmChain(s, s.NewChain(), p, 2); err != nil {
			return err
		}
	}
	if m.context >= 4 {
		smp, err := sample.New(sample.Bonsai(0))
		if err != nil {
			return err
		}
		// two passes: the first's top-k, the second's pick from it
		if err := warmChain(s, s.NewSampledChain(smp), 1, 1); err != nil {
			return err
		}
	}
	m.statePos = -1
	m.snaps = nil
	return nil
}

// warmChain runs chain c (nil: none) from position p for steps Next
// calls (steps+1 passes).
func warmChain(s *Sequence, c *Chain, p, steps int) error {
	if c == nil {
		return nil
	}
	// The chain runs at the end of the sequence; what the cache holds
	// before p does not matter here.
	s.tokens = make([]int32, p)
	if s.m.Recurrent() {
		s.m.statePos = p // junk, as the cache is: warm forgets it
	}
	for range steps {
		if _, err := c.Next(0); err != nil {
			return err
		}
	}
	_, _, err := c.Stop()
	return err
}

// Forward runs tokens at positions pos, pos+1, … through the model (in
// batches of at most Options.Batch) and leaves the last token's logits in
// Logits. The KV cache keeps positions below pos as they are, so a prompt
// that shares a cached prefix only runs what follows it. It fails with
// ErrContextFull when pos+len(tokens) exceeds the context.
//
// On a recurrent network pos must be where the state can continue: 0 (a
// fresh start), StatePos, or a snapshot's position (restored first); any
// other pos fails with ErrStateMismatch and runs nothing. Whether the KV
// cache below pos still holds the right tokens is the caller's to know, as
// for any network (Sequence does). Snapshots after pos are dropped: the
// positions they cover are being overwritten.
func (m *Model) Forward(tokens []int32, pos int) error {
	if len(tokens) == 0 {
		return fmt.Errorf("%w: no tokens to run", ErrBadShape)
	}
	if pos < 0 || pos+len(tokens) > m.context {
		return fmt.Errorf("%w: %d tokens at position %d exceed the context of %d", ErrContextFull, len(tokens), pos, m.context)
	}
	if err := m.checkIDs(tokens); err != nil {
		return err
	}
	if m.Recurrent() {
		if err := m.Restore(pos); err != nil {
			return err
		}
		m.DropAfter(pos)
	}
	for start := 0; start < len(tokens); start += m.maxBatch {
		end := min(start+m.maxBatch, len(tokens))
		if err := m.net.Forward(Batch{Tokens: tokens[start:end], Pos: pos + start}, m.logits); err != nil {
			if m.Recurrent() {
				m.statePos = -1 // a failed pass may have advanced part of the state
			}
			return err
		}
		if m.Recurrent() {
			m.statePos = pos + end
		}
	}
	return nil
}

// checkIDs rejects a token id outside the vocabulary.
func (m *Model) checkIDs(tokens []int32) error {
	for _, id := range tokens {
		if id < 0 || int(id) >= m.Hparams.Vocab {
			return fmt.Errorf("%w: token id %d outside the vocabulary of %d", ErrBadShape, id, m.Hparams.Vocab)
		}
	}
	return nil
}

// Recurrent says the network has recurrent layers (state that Forward
// tracks and Checkpoint snapshots).
func (m *Model) Recurrent() bool { return m.rspec.Floats() > 0 }

// RecurrentSpec is the recurrent state's shape (zero without recurrent
// layers).
func (m *Model) RecurrentSpec() RecurrentSpec { return m.rspec }

// StatePos is the position the recurrent state belongs to: the tokens it
// has absorbed, −1 when it belongs to none (after loading, or after a
// failed pass), and −1 always for a network without recurrent layers.
func (m *Model) StatePos() int { return m.statePos }

// Snapshots lists the positions of the snapshots held, ascending.
func (m *Model) Snapshots() []int {
	pos := make([]int, len(m.snaps))
	for i, s := range m.snaps {
		pos[i] = s.pos
	}
	return pos
}

// CanResume says Forward may start at pos: 0, StatePos, a snapshot's
// position, the one before StatePos after a chained pass (taken back on
// the device), or any position for a network without recurrent layers.
func (m *Model) CanResume(pos int) bool {
	if !m.Recurrent() || pos == 0 || pos == m.statePos || pos == m.backPos() {
		return true
	}
	_, ok := m.snapshot(pos)
	return ok
}

// ResumePoint is the latest position ≤ limit that Forward can start at
// (CanResume): limit itself for a network without recurrent layers.
func (m *Model) ResumePoint(limit int) int {
	if !m.Recurrent() || limit <= 0 {
		return max(limit, 0)
	}
	best := 0
	if m.statePos <= limit {
		best = max(m.statePos, 0)
	} else if b := m.backPos(); b >= 0 && b <= limit {
		best = b
	}
	for _, s := range m.snaps {
		if s.pos <= limit && s.pos > best {
			best = s.pos
		}
	}
	return best
}

// Checkpoint keeps a host copy of the recurrent state at StatePos (a turn
// boundary). Beyond the limit the earliest snapshot goes: the latest turn
// boundaries are where regenerate and edit return to. It does nothing for a
// network without recurrent layers, with snapshots off, or when the state
// belongs to no position.
func (m *Model) Checkpoint() error {
	if !m.Recurrent() || m.maxSnaps <= 0 || m.statePos <= 0 {
		return nil
	}
	if _, ok := m.snapshot(m.statePos); ok {
		return nil // the state at a position never changes while its snapshot lives
	}
	var buf []float32
	if len(m.snaps) >= m.maxSnaps {
		if m.snaps[0].pos > m.statePos {
			return nil // it would be the first to go
		}
		buf = m.snaps[0].state
		m.snaps = append(m.snaps[:0], m.snaps[1:]...)
	} else {
		buf = make([]float32, m.rspec.Floats())
	}
	if err := m.backend.ReadRecurrentState(buf); err != nil {
		return fmt.Errorf("snapshot at position %d: %w", m.statePos, err)
	}
	i := len(m.snaps)
	for i > 0 && m.snaps[i-1].pos > m.statePos {
		i--
	}
	m.snaps = slices.Insert(m.snaps, i, snapshot{pos: m.statePos, state: buf})
	return nil
}

// SnapshotBytes is the host memory the snapshots hold now, and the most
// they may hold.
func (m *Model) SnapshotBytes() (held, limit int64) {
	return int64(len(m.snaps)) * m.rspec.Bytes(), int64(m.maxSnaps) * m.rspec.Bytes()
}

// Restore makes the recurrent state belong to pos: nothing to do at
// StatePos or at 0 (a pass at position 0 starts from zero state), the
// snapshot taken at pos otherwise, or ErrStateMismatch when there is none.
// The snapshot stays (a second regenerate goes back to it again).
func (m *Model) Restore(pos int) error {
	if !m.Recurrent() || pos == m.statePos {
		return nil
	}
	if pos == 0 {
		m.statePos = 0
		return nil
	}
	if m.stepBack(pos) { // a chained pass taken back
		return nil
	}
	s, ok := m.snapshot(pos)
	if !ok {
		return fmt.Errorf("%w: a pass at position %d, the state is at %d and snapshots are at %v",
			ErrStateMismatch, pos, m.statePos, m.Snapshots())
	}
	if err := m.backend.WriteRecurrentState(s.state); err != nil {
		m.statePos = -1
		return fmt.Errorf("restoring the snapshot at position %d: %w", pos, err)
	}
	m.statePos = pos
	return nil
}

// DropAfter forgets the snapshots after pos (their positions no longer hold
// the tokens they saw).
func (m *Model) DropAfter(pos int) {
	for len(m.snaps) > 0 && m.snaps[len(m.snaps)-1].pos > pos {
		m.snaps = m.snaps[:len(m.snaps)-1]
	}
}

// Drop forgets every snapshot and the state's position (a new
// conversation, or a KV cache that no longer holds what they saw).
func (m *Model) Drop() {
	m.DropAfter(-1)
	if m.Recurrent() {
		m.statePos = -1
	}
}

func (m *Model) snapshot(pos int) (snapshot, bool) {
	for _, s := range m.snaps {
		if s.pos == pos {
			return s, true
		}
	}
	return snapshot{}, false
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
func (m *Model) KVSpec() KVSpec { return m.kvSpec(m.net) }

// kvSpec is net's cache for the model's context, of the types it loads with.
func (m *Model) kvSpec(net Network) KVSpec {
	s := net.KVSpec(m.context)
	s.KVTypes = m.kvTypes
	return s
}

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
