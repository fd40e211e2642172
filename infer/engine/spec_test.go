package engine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

// draftFile writes a tiny Q1_0 draft model with the Qwen3 tokenizer (edit
// may change its config) and returns its path.
func draftFile(t *testing.T, edit func(*tinymodel.Config)) string {
	t.Helper()
	cfg := tinymodel.Config{Layers: 1, Embed: 128, Heads: 2, KVHeads: 1, HeadDim: 64, FFN: 256,
		Context: 1024, Type: gguf.Q1_0, Tied: true, Seed: 3, RopeBase: 1e6}
	cfg, err := tinymodel.WithQwenTokenizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	data, err := tinymodel.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "draft.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// With either drafter the engine's greedy reply is plain decoding's, token
// for token, and the reply's stats count what was drafted, during the
// reply too.
func TestSpeculativeReplyMatchesPlain(t *testing.T) {
	f := testFile(t)
	msgs := ask("Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog.")
	reply := func(o spec.Options) reply {
		e := start(t, f, Options{Spec: o})
		e.Generate(GenerateRequest{Messages: msgs, MaxTokens: 32, Sampling: greedy})
		r := collect(t, e)
		if len(r.errors) > 0 {
			t.Fatalf("%+v: %v", o, r.errors)
		}
		return r
	}
	want := reply(spec.Options{})
	if len(want.ids) == 0 {
		t.Fatal("empty plain reply")
	}
	for _, o := range []spec.Options{
		{Mode: spec.NGram},
		{Mode: spec.Draft, DraftPath: draftFile(t, nil), MaxDraft: 4},
	} {
		got := reply(o)
		if !slices.Equal(got.ids, want.ids) || got.text != want.text {
			t.Errorf("%s: reply %q differs from plain %q", o.Mode, got.text, want.text)
		}
		st := got.done.Stats
		if o.Mode == spec.Draft && (st.Drafted == 0 || st.Verifies == 0) {
			t.Errorf("%s: stats %+v: nothing drafted", o.Mode, st)
		}
		// The counts stream with the tokens, as the status line shows them.
		if live := got.live; o.Mode == spec.Draft && (live.Drafted == 0 || live.Drafted > st.Drafted || live.Accepted > st.Accepted) {
			t.Errorf("%s: the last Stats during the reply %+v, at its end %+v", o.Mode, live, st)
		}
		if st.Accepted > st.Drafted || st.AcceptRate() < 0 || st.AcceptRate() > 1 {
			t.Errorf("%s: stats %+v", o.Mode, st)
		}
		if st.DecodeTokens != want.done.Stats.DecodeTokens || st.ContextUsed != want.done.Stats.ContextUsed {
			t.Errorf("%s: %d tokens, context %d; plain %d, %d", o.Mode, st.DecodeTokens, st.ContextUsed,
				want.done.Stats.DecodeTokens, want.done.Stats.ContextUsed)
		}
	}
}

// A draft whose vocabulary has the target's size but numbers two tokens
// the other way round is refused, with the reason.
func TestDraftVocabularyMismatch(t *testing.T) {
	f := testFile(t)
	path := draftFile(t, func(c *tinymodel.Config) {
		toks := slices.Clone(c.Extra["tokenizer.ggml.tokens"].([]string))
		toks[100], toks[101] = toks[101], toks[100]
		c.Extra["tokenizer.ggml.tokens"] = toks
	})
	e := New(Options{File: f, Backend: "cpu", Threads: 2, Context: 256, Spec: spec.Options{Mode: spec.Draft, DraftPath: path}})
	defer e.Close()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-e.Events():
			if !ok {
				t.Fatal("events closed without an error")
			}
			if err, isErr := ev.(Error); isErr {
				if !err.Fatal || !errors.Is(err.Err, spec.ErrVocabMismatch) {
					t.Fatalf("error %v (fatal %v), want a fatal ErrVocabMismatch", err.Err, err.Fatal)
				}
				return
			}
		case <-timeout:
			t.Fatal("timed out")
		}
	}
}

// Speculation near the end of the context drafts only what fits: a reply
// that runs into the end gives plain decoding's tokens and stops the same
// way; the cache then holds what plain decoding's does, so the next turn
// reuses the same prefix.
func TestSpeculationAtTheContextEnd(t *testing.T) {
	f := testFile(t)
	msgs := ask("one two three one two three one two three one two three")
	run := func(o spec.Options) (reply, reply) {
		e := start(t, f, Options{Spec: o, Context: 80})
		e.Generate(GenerateRequest{Messages: msgs, Sampling: greedy})
		first := collect(t, e)
		e.Generate(GenerateRequest{Messages: ask("again"), Sampling: greedy, MaxTokens: 8})
		return first, collect(t, e)
	}
	want, wantNext := run(spec.Options{})
	if want.done.Reason != "length" || want.done.Stats.ContextUsed < 70 {
		t.Fatalf("plain decoding stopped (%s) at %d of 80 context tokens: pick a prompt that reaches the end", want.done.Reason, want.done.Stats.ContextUsed)
	}
	for _, o := range []spec.Options{{Mode: spec.NGram, MaxDraft: 6}, {Mode: spec.Draft, DraftPath: draftFile(t, nil), MaxDraft: 6}} {
		got, next := run(o)
		if !slices.Equal(got.ids, want.ids) || got.done.Reason != want.done.Reason {
			t.Errorf("%s: %d tokens (%s), plain %d (%s)", o.Mode, len(got.ids), got.done.Reason, len(want.ids), want.done.Reason)
		}
		if got.done.Stats.ContextUsed != want.done.Stats.ContextUsed {
			t.Errorf("%s: context used %d, plain %d", o.Mode, got.done.Stats.ContextUsed, want.done.Stats.ContextUsed)
		}
		if !slices.Equal(next.ids, wantNext.ids) || next.done.Stats.PrefillTokens != wantNext.done.Stats.PrefillTokens {
			t.Errorf("%s: the next turn prefilled %d tokens and said %v; plain %d, %v", o.Mode,
				next.done.Stats.PrefillTokens, next.ids, wantNext.done.Stats.PrefillTokens, wantNext.ids)
		}
	}
}
