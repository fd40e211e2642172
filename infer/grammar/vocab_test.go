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
