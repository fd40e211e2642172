package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/slots"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// loaded is everything the engine holds for one model file: the file, the
// model on its backend with the scheduler that runs it (infer/slots: one
// slot, through the model's own passes, whose cache is the
// conversation's), and the vocabulary and template that turn messages into
// tokens. It is one value so that SwitchModel can keep the old one aside
// and put it back whole.
type loaded struct {
	file     *gguf.File
	ownsFile bool
	model    *infer.Model
	sched    *slots.Scheduler
	tok      *tokenizer.Tokenizer
	tmpl     *chat.Template
	stopIDs  map[int32]bool
	info     ModelInfo
}

// close releases the model and, if the engine opened it, the file.
func (l *loaded) close() {
	l.closeModel()
	if l.ownsFile && l.file != nil {
		l.file.Close()
		l.file = nil
	}
}

func (e *Engine) open() error {
	if e.opts.File != nil {
		e.cur.file = e.opts.File
	} else {
		if e.opts.Path == "" {
			return errors.New("engine: no model file given")
		}
		e.emit(LoadProgress{Stage: "mapping " + filepath.Base(e.opts.Path)})
		f, err := gguf.Open(e.opts.Path)
		if err != nil {
			return err
		}
		e.cur.file, e.cur.ownsFile = f, true
	}
	if err := e.cur.bindVocab(); err != nil {
		return err
	}
	e.vocab.Store(&vocabulary{tok: e.cur.tok, tmpl: e.cur.tmpl})
	return nil
}

// bindVocab reads the file's tokenizer and chat template.
func (l *loaded) bindVocab() error {
	tok, err := tokenizer.FromGGUF(l.file.KV)
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	l.tok = tok
	l.tmpl = chat.FromGGUF(l.file.KV)
	l.stopIDs = map[int32]bool{}
	for _, id := range l.tmpl.StopIDs(tok.ID) {
		l.stopIDs[id] = true
	}
	return nil
}

// load builds the current file's model on a backend. On failure the
// previous model, if any, stays.
func (e *Engine) load(backend string) error {
	stage := "loading weights on " + orAuto(backend)
	m, err := infer.Load(e.cur.file, infer.Options{
		Backend: backend, Adapter: e.opts.Adapter, GPU: e.opts.GPU, Threads: e.opts.Threads, Context: e.opts.Context, KV: e.opts.KV, Batch: e.opts.Batch,
		Profile: e.profiling.Load(), Snapshots: e.opts.Snapshots,
		Progress: func(done, total int64) {
			e.markStarted(nil)
			e.emit(LoadProgress{Stage: stage, Done: done, Total: total})
		},
	})
	if err != nil {
		return withSoftwareHint(err)
	}
	// One sequence, the chat's: run through Forward, so that the model's
	// own recurrent state is the slot's (turn snapshots, saved states).
	sched, err := slots.New(slots.Options{Model: m, Slots: 1, Context: m.Context(), Forward: true, MaxDraft: e.opts.Spec.MaxDraft})
	if err != nil {
		m.Close()
		return err
	}
	e.cur.closeModel()
	e.cur.model, e.cur.sched, e.backend = m, sched, backend
	e.profilingOn = e.profiling.Load()
	e.cur.info = modelInfo(e.cur.file, m)
	e.emit(Loaded{Info: e.cur.info})
	for _, n := range m.Notes {
		e.emit(Notice{Text: n})
	}
	return nil
}

// switchModel replaces the model with the file at path, on the backend in
// use; the conversation's KV cache starts afresh. On any failure the old
// model stays, loaded and usable.
func (e *Engine) switchModel(path string) error {
	e.emit(LoadProgress{Stage: "mapping " + filepath.Base(path)})
	open := e.opts.Open
	if open == nil {
		open = gguf.Open
	}
	f, err := open(path)
	if err != nil {
		return err
	}
	old := e.cur
	e.cur = loaded{file: f, ownsFile: true}
	err = e.cur.bindVocab()
	if err == nil {
		err = e.load(e.backend)
	}
	if err != nil {
		e.cur.close()
		e.cur = old
		return err
	}
	old.close()
	e.vocab.Store(&vocabulary{tok: e.cur.tok, tmpl: e.cur.tmpl})
	return nil
}

// closeModel releases the model and its scheduler.
func (l *loaded) closeModel() {
	if l.sched != nil {
		l.sched.Close()
		l.sched = nil
	}
	if l.model != nil {
		l.model.Close()
		l.model = nil
	}
}

func orAuto(s string) string {
	if s == "" {
		return "auto"
	}
	return s
}

func modelInfo(f *gguf.File, m *infer.Model) ModelInfo {
	bi := m.Backend().Info()
	name, _ := f.KV.String("general.name")
	if name == "" {
		name = filepath.Base(f.Path)
	}
	mem := m.Memory(0)
	details := bi.Details
	fallback := ""
	if m.Fallback != nil {
		// One line in the panel; the reason, which runs long, where it is
		// asked for (ModelInfo.Fallback).
		details = append([]string{"auto: GPU declined (see /backend)"}, details...)
		fallback = withSoftwareHint(m.Fallback).Error()
	}
	return ModelInfo{
		Path: f.Path, Name: name, Arch: m.Hparams.Arch, Variant: m.Variant.Name,
		Params: infer.Params(f), FileBytes: mem.FileBytes, WeightBytes: mem.WeightBytes,
		ContextSize: m.Context(), KVAllocBytes: mem.KVAlloc,
		RecurrentBytes: mem.Recurrent, SnapshotBytes: mem.SnapshotsMax,
		Backend: bi.Name, Adapter: bi.Adapter, Threads: bi.Threads, SIMD: bi.SIMD, Details: details,
		Sampling: DefaultSampling(m.Variant),
		Fallback: fallback,
	}
}

// withSoftwareHint adds to a GPU refusal over software adapters how to
// allow one; other errors pass unchanged.
func withSoftwareHint(err error) error {
	if err == nil || !strings.Contains(err.Error(), "software adapter") {
		return err
	}
	return fmt.Errorf("%w. BONSAI_GPU_SOFTWARE=1 (or --adapter NAME) lets the GPU backend use one, though it runs slower than the CPU backend", err)
}

func (e *Engine) release() {
	e.closeDraft()
	e.cur.close()
}

// cached is how many tokens the conversation's cache holds.
func (e *Engine) cached() int {
	n := 0
	e.withCache(func(seq *infer.Sequence) error {
		n = seq.Len()
		return nil
	})
	return n
}

// forgetCache empties the conversation's cache.
func (e *Engine) forgetCache() {
	e.withCache(func(seq *infer.Sequence) error {
		seq.Reset()
		return nil
	})
}

// withCache runs fn on the conversation's cache, between replies
// (slots.Scheduler.State); without a model there is none.
func (e *Engine) withCache(fn func(seq *infer.Sequence) error) error {
	if e.cur.sched == nil {
		return ErrNoModel
	}
	return e.cur.sched.State(fn)
}
