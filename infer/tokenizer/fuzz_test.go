package tokenizer

import (
	"testing"
	"unicode/utf8"
)

// FuzzEncode checks that any valid UTF-8 text survives encode→decode without
// special-token parsing, and that nothing panics on any input.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "Hello world", " \n\n \t x", "'s'LL'Re", "3.14159", "我想在apple工作", "🦙🦙", "<|im_start|>", "<think>\n\n</think>", "\xff\xfe", "a\u00a0\u3000b"} {
		f.Add(s)
	}
	tok := qwen2(f)
	f.Fuzz(func(t *testing.T, text string) {
		ids := tok.Encode(text, false)
		if !utf8.ValidString(text) {
			return
		}
		if got := tok.Decode(ids); got != text {
			t.Fatalf("round trip of %q gave %q (ids %v)", text, got, ids)
		}
		_ = tok.Encode(text, true)
	})
}
