package synth

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/qwen"
)

// qwen3ChatTemplate is the chat template Qwen3 (and so Bonsai 1.x) GGUF
// files carry in tokenizer.chat_template.
//
//go:embed qwen3.jinja
var qwen3ChatTemplateFile string

var qwen3ChatTemplate = strings.TrimSuffix(qwen3ChatTemplateFile, "\n")

const (
	qwenVocab = qwen.VocabSize
	// qwen35Vocab is the embedding height of the 27B qwen35 models. The
	// synthetic files keep the Qwen3 tokenizer and pad it to that size with
	// unused [PADn] tokens, as the Qwen3 vocab itself is padded.
	qwen35Vocab = 248320
	maxVocab    = qwen35Vocab
	// minVocab leaves room for the 256 byte tokens, a few merges and the
	// special tokens a truncated vocab keeps.
	minVocab = 512
)

// vocab is a tokenizer as GGUF metadata stores it.
type vocab struct {
	tokens        []string
	types         []int32
	merges        []string
	bos, eos, pad int32
}

var (
	qwen2Once   sync.Once
	qwen2Tokens []string
	qwen2Types  []int32
	qwen2Merges []string
	qwen2Err    error
)

// qwen2Vocab reads the Qwen2 vocab embedded in package qwen, once.
func qwen2Vocab() ([]string, []int32, []string, error) {
	qwen2Once.Do(func() {
		f, err := gguf.Parse(qwen.VocabGGUF)
		if err != nil {
			qwen2Err = fmt.Errorf("synth: reading the embedded Qwen vocab: %w", err)
			return
		}
		var ok1, ok2, ok3 bool
		qwen2Tokens, ok1 = f.KV.Strings("tokenizer.ggml.tokens")
		qwen2Types, ok2 = f.KV.Int32s("tokenizer.ggml.token_type")
		qwen2Merges, ok3 = f.KV.Strings("tokenizer.ggml.merges")
		if !ok1 || !ok2 || !ok3 || len(qwen2Tokens) != qwenVocab || len(qwen2Types) != qwenVocab {
			qwen2Err = fmt.Errorf("synth: the embedded Qwen vocab lacks tokens, token types or merges of %d tokens", qwenVocab)
		}
	})
	return qwen2Tokens, qwen2Types, qwen2Merges, qwen2Err
}

// qwen3Specials are the Qwen3 control and added tokens, in id order: a
// truncated vocab keeps all of them, renumbered, at its end.
func qwen3Specials() []qwen.AddedToken {
	s := []qwen.AddedToken{
		{ID: qwen.EndOfText, Text: "<|endoftext|>", Type: qwen.TypeControl},
		{ID: qwen.IMStart, Text: "<|im_start|>", Type: qwen.TypeControl},
		{ID: qwen.IMEnd, Text: "<|im_end|>", Type: qwen.TypeControl},
	}
	return append(s, qwen.AddedTokens...)
}

// padType is the token type of the Qwen3 vocab's own padding ([PAD151669]
// and on): llama.cpp's user-defined type.
const padType = 4

// qwen3Vocab is the real Qwen3 tokenizer when n is the full 151,936 (padded
// with [PADn] tokens beyond it), and otherwise the same tokenizer cut to n tokens: the first n−26 Qwen tokens
// (the 256 byte tokens and the tokens of the earliest merges), the merges
// that stay inside them, and the 26 special tokens renumbered to the end.
// Prompts still tokenize; they just take more, shorter tokens.
func qwen3Vocab(n int) (vocab, error) {
	tokens, types, merges, err := qwen2Vocab()
	if err != nil {
		return vocab{}, err
	}
	if n >= qwenVocab {
		t, ty := qwen.Qwen3(tokens, types)
		for id := qwenVocab; id < n; id++ {
			t = append(t, fmt.Sprintf("[PAD%d]", id))
			ty = append(ty, padType)
		}
		return vocab{tokens: t, types: ty, merges: merges, bos: qwen.BOS, eos: qwen.EOS, pad: qwen.PAD}, nil
	}
	specials := qwen3Specials()
	base := n - len(specials)
	if n < minVocab || base < 256 {
		return vocab{}, fmt.Errorf("synth: vocab %d is below the minimum %d", n, minVocab)
	}
	v := vocab{
		tokens: append(make([]string, 0, n), tokens[:base]...),
		types:  append(make([]int32, 0, n), types[:base]...),
	}
	remap := map[int32]int32{}
	for i, s := range specials {
		id := int32(base + i)
		remap[s.ID] = id
		v.tokens = append(v.tokens, s.Text)
		v.types = append(v.types, s.Type)
	}
	v.bos, v.eos, v.pad = remap[qwen.BOS], remap[qwen.EOS], remap[qwen.PAD]

	kept := make(map[string]bool, base)
	for _, t := range v.tokens[:base] {
		kept[t] = true
	}
	for _, m := range merges {
		left, right, ok := strings.Cut(m, " ")
		if ok && kept[left] && kept[right] && kept[left+right] {
			v.merges = append(v.merges, m)
		}
	}
	return v, nil
}
