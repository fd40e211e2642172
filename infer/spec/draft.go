package spec

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// Drafter proposes tokens to follow a context; the scheduler (infer/slots)
// verifies them beside the token it runs.
type Drafter interface {
	// Draft proposes up to k tokens to follow ctx (the whole sequence:
	// conversation and reply so far). dists is nil when each token is
	// proposed for sure (a point mass); else dists[i] is the distribution
	// token i was drawn from, for rejection sampling. The slices stay
	// valid until the next call.
	Draft(ctx []int32, k int) (tokens []int32, dists [][]sample.Prob, err error)
}

// lookup adapts Ngram to Drafter.
type lookup struct{ g *Ngram }

func (l lookup) Draft(ctx []int32, k int) ([]int32, [][]sample.Prob, error) {
	return l.g.Draft(ctx, k), nil, nil
}

// LookupDrafter is prompt lookup as a Drafter.
func LookupDrafter(g *Ngram) Drafter { return lookup{g} }

// SameVocab reports whether a draft model's tokens are the target's: the
// same number of tokens, and token by token the same string and type (two
// vocabularies of one size can still number their tokens differently),
// and logits rows of the same width. It returns an error wrapping
// ErrVocabMismatch that names the first difference.
func SameVocab(target, draft *tokenizer.Tokenizer, targetRows, draftRows int) error {
	if target.Vocab() != draft.Vocab() {
		return fmt.Errorf("%w: %d tokens against %d", ErrVocabMismatch, draft.Vocab(), target.Vocab())
	}
	for id := range int32(target.Vocab()) {
		if a, b := target.Token(id), draft.Token(id); a != b {
			return fmt.Errorf("%w: token %d is %q in the draft, %q in the target", ErrVocabMismatch, id, b, a)
		}
		if a, b := target.Type(id), draft.Type(id); a != b {
			return fmt.Errorf("%w: token %d (%q) has type %d in the draft, %d in the target", ErrVocabMismatch, id, target.Token(id), b, a)
		}
	}
	if targetRows != draftRows {
		return fmt.Errorf("%w: %d logits a token against %d", ErrVocabMismatch, draftRows, targetRows)
	}
	return nil
}

// ModelDrafter drafts with a smaller model of the same vocabulary: it
// decodes k tokens on its own sequence, greedily at temperature 0, else
// sampling with the target's settings (its own random stream) and keeping
// each distribution for rejection sampling. Its cache follows the
// conversation, so each draft only runs what is new.
type ModelDrafter struct {
	seq    *infer.Sequence
	smp    *sample.Sampler
	greedy bool
	params sample.Params
	tokens []int32
	dists  [][]sample.Prob
}

// NewModelDrafter drafts with m (whose vocabulary the caller checked with
// SameVocab) using the target's sampling params; seed picks its own
// random stream.
func NewModelDrafter(m *infer.Model, p sample.Params, seed uint64) (*ModelDrafter, error) {
	p.Seed = seed
	smp, err := sample.New(p)
	if err != nil {
		return nil, err
	}
	return &ModelDrafter{seq: infer.NewSequence(m), smp: smp, greedy: p.Temperature == 0, params: p}, nil
}

// SetSampling takes a request's sampling params (and a seed for the
// draft's own stream), keeping the cache.
func (d *ModelDrafter) SetSampling(p sample.Params, seed uint64) error {
	p.Seed = seed
	smp, err := sample.New(p)
	if err != nil {
		return err
	}
	d.smp, d.greedy, d.params = smp, p.Temperature == 0, p
	return nil
}

// Sequence is the draft model's cache (reset it with the conversation).
func (d *ModelDrafter) Sequence() *infer.Sequence { return d.seq }

// Draft decodes up to k tokens after ctx on the draft model.
func (d *ModelDrafter) Draft(ctx []int32, k int) ([]int32, [][]sample.Prob, error) {
	d.tokens, d.dists = d.tokens[:0], d.dists[:0]
	m := d.seq.Model()
	if len(ctx) == 0 || k <= 0 {
		return nil, nil, nil
	}
	k = min(k, m.Context()-len(ctx))
	if k <= 0 {
		return nil, nil, nil
	}
	// Keep what the cache shares with ctx, short of ctx's last token (whose
	// logits the draft starts from), and run the rest.
	held := d.seq.Tokens()
	shared := 0
	for shared < len(held) && shared < len(ctx)-1 && held[shared] == ctx[shared] {
		shared++
	}
	if shared < len(held) {
		if err := d.seq.Rewind(shared); err != nil {
			d.seq.Reset() // the mark is gone: start over
		}
	}
	if err := d.seq.Mark(); err != nil {
		d.seq.Reset()
	}
	if _, err := d.seq.Prefill(ctx, nil); err != nil {
		return nil, nil, err
	}
	// The draft sampler's penalty window is the context's end.
	d.smp.Reset()
	for _, id := range ctx[max(0, len(ctx)-d.params.RepeatLastN):] {
		d.smp.Accept(id)
	}
	for {
		logits := m.Logits()
		var id int32
		if d.greedy {
			id = d.smp.Sample(logits)
		} else {
			var q []sample.Prob
			if len(d.dists) < cap(d.dists) {
				q = d.dists[:len(d.dists)+1][len(d.dists)]
			}
			q = d.smp.Dist(logits, q)
			id = sample.Pick(q, d.smp.Float64())
			d.dists = append(d.dists, q)
		}
		d.smp.Accept(id)
		d.tokens = append(d.tokens, id)
		if len(d.tokens) == k {
			break
		}
		if err := d.seq.Append(id); err != nil {
			return nil, nil, err
		}
	}
	if d.greedy {
		return d.tokens, nil, nil
	}
	return d.tokens, d.dists, nil
}
