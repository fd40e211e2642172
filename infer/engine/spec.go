package engine

import (
	"fmt"
	"path/filepath"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/spec"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// speculation is the engine's speculative decoding (Options.Spec): the
// draft model, when there is one, and whether its vocabulary fits the
// model in use.
type speculation struct {
	file    *gguf.File
	model   *infer.Model
	tok     *tokenizer.Tokenizer
	drafter *spec.ModelDrafter
	// checked is the target the vocabulary was compared with, mismatch
	// the outcome (nil: they agree).
	checked  *infer.Model
	mismatch error
}

// openDraft loads the draft model of Options.Spec on the target's backend.
// A draft mode without a model, or a model that cannot be loaded, is an
// error: the user asked for it.
func (e *Engine) openDraft() error {
	o := e.opts.Spec
	if o.Mode != spec.Draft {
		return nil
	}
	if o.DraftPath == "" {
		return spec.ErrNoDraft
	}
	e.emit(LoadProgress{Stage: "mapping draft " + filepath.Base(o.DraftPath)})
	f, err := gguf.Open(o.DraftPath)
	if err != nil {
		return fmt.Errorf("draft model: %w", err)
	}
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		f.Close()
		return fmt.Errorf("draft model %s: tokenizer: %w", filepath.Base(o.DraftPath), err)
	}
	backend := e.backend
	if e.cur.model != nil {
		backend = e.cur.model.Backend().Name()
	}
	m, err := infer.Load(f, infer.Options{Backend: backend, Adapter: e.opts.Adapter, Threads: e.opts.Threads,
		Context: e.cur.model.Context(), Batch: e.opts.Batch, Snapshots: -1})
	if err != nil {
		f.Close()
		return fmt.Errorf("draft model %s: %w", filepath.Base(o.DraftPath), err)
	}
	d, err := spec.NewModelDrafter(m, sample.Params{}, 0)
	if err != nil {
		m.Close()
		f.Close()
		return err
	}
	e.spec = speculation{file: f, model: m, tok: tok, drafter: d}
	if err := e.checkDraft(); err != nil {
		e.closeDraft()
		return fmt.Errorf("draft model %s: %w", filepath.Base(o.DraftPath), err)
	}
	return nil
}

// checkDraft compares the draft's vocabulary with the model in use (once
// per model).
func (e *Engine) checkDraft() error {
	s := &e.spec
	if s.model == nil || s.checked == e.cur.model {
		return s.mismatch
	}
	s.checked = e.cur.model
	s.mismatch = spec.SameVocab(e.cur.tok, s.tok, e.cur.model.Hparams.Vocab, s.model.Hparams.Vocab)
	if s.mismatch == nil {
		s.drafter.Sequence().Reset() // a new target: the draft's cache follows its conversation
	}
	return s.mismatch
}

func (e *Engine) closeDraft() {
	if e.spec.model != nil {
		e.spec.model.Close()
	}
	if e.spec.file != nil {
		e.spec.file.Close()
	}
	e.spec = speculation{}
}

// drafter is the request's drafter: nil for plain decoding.
func (e *Engine) drafter(p sample.Params) spec.Drafter {
	switch e.opts.Spec.Mode {
	case spec.NGram:
		if e.cur.model == nil || !e.opts.Spec.LookupOn(e.cur.model.Backend().Name()) {
			return nil
		}
		return spec.LookupDrafter(spec.NewNgram())
	case spec.Draft:
		if e.spec.drafter == nil {
			return nil
		}
		fresh := e.spec.checked != e.cur.model
		if err := e.checkDraft(); err != nil {
			if fresh {
				e.emit(Notice{Text: "speculation off for this model: " + err.Error()})
			}
			return nil
		}
		if err := e.spec.drafter.SetSampling(p, p.Seed^0x9e3779b97f4a7c15); err != nil {
			return nil
		}
		return e.spec.drafter
	}
	return nil
}
