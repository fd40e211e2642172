package tokenizer

import (
	"reflect"
	"testing"
)

func TestSplitWords(t *testing.T) {
	qwen2 := preTokenizer{digitRun: 1}
	llama3 := preTokenizer{digitRun: 3}
	qwen35 := preTokenizer{digitRun: 1, marksAreLetters: true}
	tests := []struct {
		name string
		pre  preTokenizer
		text string
		want []string
	}{
		{"words and spaces", qwen2, "Hello world", []string{"Hello", " world"}},
		{"contractions either case", qwen2, "I'Ve it's", []string{"I", "'Ve", " it", "'s"}},
		{"apostrophe before other letters", qwen2, "'x", []string{"'x"}},
		{"single digits", qwen2, "x 1234", []string{"x", " ", "1", "2", "3", "4"}},
		{"digit triples", llama3, "x 1234", []string{"x", " ", "123", "4"}},
		{"punctuation keeps one space and newlines", qwen2, "a ...\n\nb", []string{"a", " ...\n\n", "b"}},
		{"spaces before a word", qwen2, "a   b", []string{"a", "  ", " b"}},
		{"trailing spaces", qwen2, "a   ", []string{"a", "   "}},
		{"spaces then newline", qwen2, "a \n  b", []string{"a", " \n", " ", " b"}},
		{"tab prefixes a word", qwen2, "\tword", []string{"\tword"}},
		{"newline never prefixes a word", qwen2, "\nword", []string{"\n", "word"}},
		{"non-ASCII space is whitespace", qwen2, "a\u00a0\u00a0b", []string{"a", "\u00a0", "\u00a0b"}},
		{"CJK letters", qwen2, "我想在apple", []string{"我想在apple"}},
		{"combining mark prefixes the next qwen2 word", qwen2, "cafe\u0301s", []string{"cafe", "\u0301s"}},
		{"combining mark joins a qwen35 word", qwen35, "cafe\u0301s", []string{"cafe\u0301s"}},
		{"empty", qwen2, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			splitWords(tt.text, tt.pre, func(w string) { got = append(got, w) })
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
