package grammar_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/grammar"
)

// enumSchema is an object whose one property takes one of n strings.
func enumSchema(t testing.TB, n int) *grammar.Schema {
	t.Helper()
	s, err := grammar.Compile(enumJSON(n))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func enumJSON(n int) []byte {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("%x", uint32(i)*2654435761) // spread: they part at the first byte
	}
	enum, _ := json.Marshal(vals)
	return []byte(`{"type":"object","properties":{"k":{"enum":` + string(enum) + `}},"required":["k"]}`)
}

// maskTime is the slowest of a few Masks at the start of the enum's value
// and halfway into it.
func maskTime(t testing.TB, v *grammar.Vocab, vocab int, s *grammar.Schema) time.Duration {
	t.Helper()
	var worst time.Duration
	for _, prefix := range []string{`{"k": `, `{"k": "3`} {
		m := grammar.NewMachine(s)
		if !m.Feed(prefix) {
			t.Fatalf("%q refused", prefix)
		}
		c := grammar.NewConstraint(v, m)
		logits := make([]float32, vocab)
		for range 3 {
			start := time.Now()
			c.Mask(logits)
			worst = max(worst, time.Since(start))
		}
	}
	return worst
}

// Item 4 of issue 30: a 75,000-value enum made each masked step slow,
// on the scheduler's one goroutine, stalling every other slot. A schema's
// enum values are bounded when it is compiled.
func TestEnumBoundedAtAdmission(t *testing.T) {
	if _, err := grammar.Compile(enumJSON(75_000)); !errors.Is(err, grammar.ErrUnsupported) {
		t.Errorf("a 75,000-value enum: %v", err)
	}
	if _, err := grammar.Compile(enumJSON(grammar.MaxEnumValues)); err != nil {
		t.Errorf("an enum of %d values: %v", grammar.MaxEnumValues, err)
	}
}

// Within the bound a mask costs about what a small enum's does: the
// literals are narrowed by binary search, not scanned for every token
// tried (which made a 75,000-value enum's mask 12 times a small one's).
func TestMaskCostIndependentOfEnumSize(t *testing.T) {
	tok, v := qwenVocab(t)
	small := maskTime(t, v, tok.Vocab(), enumSchema(t, 4))
	big := maskTime(t, v, tok.Vocab(), enumSchema(t, grammar.MaxEnumValues))
	t.Logf("mask: %s with 4 values, %s with %d", small, big, grammar.MaxEnumValues)
	if big > 10*small+200*time.Millisecond {
		t.Errorf("a mask takes %s with %d enum values, %s with 4", big, grammar.MaxEnumValues, small)
	}
}
