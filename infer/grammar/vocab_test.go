package grammar_test

import (
	"math"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/grammar"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

func qwenVocab(b testing.TB) (*tokenizer.Tokenizer, *grammar.Vocab) {
	b.Helper()
	cfg, err := tinymodel.WithQwenTokenizer(tinymodel.Small(gguf.Q8_0))
	if err != nil {
		b.Fatal(err)
	}
	f, err := tinymodel.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		b.Fatal(err)
	}
	end, _ := tok.ID("<|im_end|>")
	return tok, grammar.NewVocab(tok.Vocab(), tok.Piece, tok.IsControl, []int32{end})
}

// Over Qwen3's 151k tokens, Mask inside a string (nearly every token
// allowed) and between values (few allowed): the cost of a constrained
// step when the unconstrained pick does not fit.
func BenchmarkMaskQwen(b *testing.B) {
	tok, v := qwenVocab(b)
	s, err := grammar.Compile([]byte(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, prefix string }{{"in-string", `{"name": "Al`}, {"after-key", `{"name"`}} {
		b.Run(c.name, func(b *testing.B) {
			m := grammar.NewMachine(s)
			if !m.Feed(c.prefix) {
				b.Fatal("prefix refused")
			}
			cons := grammar.NewConstraint(v, m)
			logits := make([]float32, tok.Vocab())
			for b.Loop() {
				cons.Mask(logits)
			}
			allowed := 0
			for _, l := range logits {
				if !math.IsInf(float64(l), -1) {
					allowed++
				}
			}
			b.ReportMetric(float64(allowed), "allowed")
		})
	}
}

// The constructs of issue 34 under the same mask: inside a value two
// union readings share (a discriminated union's key), inside a string an
// automaton recognizes (plain tokens then need the walk too), and in a
// bounded integer.
func BenchmarkMaskQwenSchemas(b *testing.B) {
	tok, v := qwenVocab(b)
	for _, c := range []struct{ name, schema, prefix string }{
		{"union-key", `{"anyOf":[{"type":"object","properties":{"t":{"const":"a"},"x":{"type":"integer"}},"required":["t","x"]},
			{"type":"object","properties":{"t":{"const":"b"},"y":{"type":"string"}},"required":["t","y"]}]}`, `{"t"`},
		{"pattern-string", `{"type":"string","pattern":"^[a-z][a-z0-9_]{0,30}$"}`, `"ab`},
		{"date-time", `{"type":"string","format":"date-time"}`, `"2024-`},
		{"bounded-int", `{"type":"integer","minimum":-40,"maximum":1200}`, `1`},
		{"integer", `{"type":"integer"}`, `1`},
	} {
		s, err := grammar.Compile([]byte(c.schema))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			m := grammar.NewMachine(s)
			if !m.Feed(c.prefix) {
				b.Fatal("prefix refused")
			}
			cons := grammar.NewConstraint(v, m)
			logits := make([]float32, tok.Vocab())
			for b.Loop() {
				cons.Mask(logits)
			}
			allowed := 0
			for _, l := range logits {
				if !math.IsInf(float64(l), -1) {
					allowed++
				}
			}
			b.ReportMetric(float64(allowed), "allowed")
		})
	}
}

// Inside a pattern's string the mask runs the automaton over the tokens'
// characters instead of the machine: it must allow exactly the tokens the
// machine takes.
func TestPatternMaskMatchesMachine(t *testing.T) {
	tok, v := qwenVocab(t)
	for _, c := range []struct{ schema, prefix string }{
		{`{"type":"string","pattern":"^[a-z][a-z0-9_ ]{0,30}$"}`, `"ab`},
		{`{"type":"string","format":"date-time"}`, `"2024-0`},
		{`{"type":"string","format":"email","maxLength":12}`, `"a.b`},
		{`{"type":"string","pattern":"^caf\u00e9[^x]*$"}`, `"caf`},
		{`{"type":"string","pattern":"h\u00e9llo"}`, `"`},
	} {
		s, err := grammar.Compile([]byte(c.schema))
		if err != nil {
			t.Fatal(err)
		}
		m := grammar.NewMachine(s)
		if !m.Feed(c.prefix) {
			t.Fatalf("%s: %q refused", c.schema, c.prefix)
		}
		cons := grammar.NewConstraint(v, m)
		logits := make([]float32, tok.Vocab())
		cons.Mask(logits)
		allowed := 0
		for id := range logits {
			masked := math.IsInf(float64(logits[id]), -1)
			if want := cons.Allowed(int32(id)); masked == want {
				t.Errorf("%s after %q: token %d %q masked %v, the machine takes it %v", c.schema, c.prefix, id, tok.Piece(int32(id)), masked, want)
			}
			if !masked {
				allowed++
			}
		}
		if allowed == 0 {
			t.Errorf("%s after %q: nothing allowed", c.schema, c.prefix)
		}
	}
}
