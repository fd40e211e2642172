package synth

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
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

// Qwen2.5's and Llama 3.2's chat templates, as their GGUF files carry them.
var (
	//go:embed qwen2.jinja
	qwen2ChatTemplateFile string
	//go:embed llama3.jinja
	llama3ChatTemplateFile string

	qwen2ChatTemplate  = strings.TrimSuffix(qwen2ChatTemplateFile, "\n")
	llama3ChatTemplate = strings.TrimSuffix(llama3ChatTemplateFile, "\n")
)

// llamaBPEGz is llama.cpp's models/ggml-vocab-llama-bpe.gguf (Llama 3's
// tokenizer, no tensors), gzipped: 2 MB in the binary instead of 7.5.
//
//go:embed llama-bpe.gguf.gz
var llamaBPEGz []byte

// llama3Vocab is the size of Llama 3's tokenizer: 128,000 BPE tokens and
// 256 special ones.
const llama3Vocab = 128256

const (
	qwenVocab = qwen.VocabSize
	// qwen35Vocab is the embedding height of the 27B qwen35 models. The
	// synthetic files keep the Qwen3 tokenizer and pad it to that size with
	// unused [PADn] tokens, as the Qwen3 vocab itself is padded.
	qwen35Vocab = 248320
	// gemma3Vocab is Gemma 3 1B's embedding height (SentencePiece's
	// 262,144 pieces).
	gemma3Vocab = 262144
	maxVocab    = gemma3Vocab
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
	pre           string // tokenizer.ggml.pre
	addBOS        bool
	template      string
}

// vocabFor is the tokenizer a shape's files carry: Llama 3's for llama
// (cut to the shape's vocab like Qwen's, see llamaVocab), Qwen's for the
// others.
func vocabFor(s Shape) (vocab, error) {
	switch s.arch() {
	case "llama":
		return llamaVocab(s.Vocab)
	case "qwen2":
		v, err := qwen3Vocab(s.Vocab)
		v.template = qwen2ChatTemplate
		return v, err
	}
	return qwen3Vocab(s.Vocab)
}

var (
	llamaOnce   sync.Once
	llamaTokens []string
	llamaTypes  []int32
	llamaMerges []string
	llamaErr    error
)

// llamaBPE reads the embedded Llama 3 vocab, once.
func llamaBPE() ([]string, []int32, []string, error) {
	llamaOnce.Do(func() {
		zr, err := gzip.NewReader(bytes.NewReader(llamaBPEGz))
		if err != nil {
			llamaErr = fmt.Errorf("synth: reading the embedded Llama 3 vocab: %w", err)
			return
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			llamaErr = fmt.Errorf("synth: reading the embedded Llama 3 vocab: %w", err)
			return
		}
		f, err := gguf.Parse(raw)
		if err != nil {
			llamaErr = fmt.Errorf("synth: reading the embedded Llama 3 vocab: %w", err)
			return
		}
		var ok1, ok2, ok3 bool
		llamaTokens, ok1 = f.KV.Strings("tokenizer.ggml.tokens")
		llamaTypes, ok2 = f.KV.Int32s("tokenizer.ggml.token_type")
		llamaMerges, ok3 = f.KV.Strings("tokenizer.ggml.merges")
		if !ok1 || !ok2 || !ok3 || len(llamaTokens) != llama3Vocab || len(llamaTypes) != llama3Vocab {
			llamaErr = fmt.Errorf("synth: the embedded Llama 3 vocab lacks tokens, token types or merges of %d tokens", llama3Vocab)
		}
	})
	return llamaTokens, llamaTypes, llamaMerges, llamaErr
}

// Llama 3's special tokens that a cut vocab keeps (renumbered to its end):
// the text's and the chat template's markers.
const (
	llamaBOS = 128000 // <|begin_of_text|>
	llamaEOT = 128009 // <|eot_id|>, the Instruct files' eos
)

var llamaSpecials = []int32{llamaBOS, 128001, 128006, 128007, 128008, llamaEOT, 128010}

// llama31Names are the special tokens Llama 3.1 named where Llama 3's
// vocab (llama.cpp's file) has reserved ones: 3.1's and 3.2's files, and
// their chat templates, use these.
var llama31Names = map[int32]string{128008: "<|eom_id|>", 128010: "<|python_tag|>"}

// llamaToken is token id of Llama 3's vocab under its Llama 3.1 name.
func llamaToken(tokens []string, id int32) string {
	if n, ok := llama31Names[id]; ok {
		return n
	}
	return tokens[id]
}

// llamaVocab is Llama 3.1's tokenizer (pre-tokenizer llama-bpe, BOS
// added) when n is its 128,256 tokens (padded beyond), and otherwise cut to n as
// qwen3Vocab cuts Qwen's: the first BPE tokens, the merges inside them,
// and the text and chat markers renumbered to the end.
func llamaVocab(n int) (vocab, error) {
	tokens, types, merges, err := llamaBPE()
	if err != nil {
		return vocab{}, err
	}
	v := vocab{pre: "llama-bpe", addBOS: true, template: llama3ChatTemplate}
	if n >= llama3Vocab {
		v.tokens = append(make([]string, 0, n), tokens...)
		for id, name := range llama31Names {
			v.tokens[id] = name
		}
		v.types = append(make([]int32, 0, n), types...)
		for id := llama3Vocab; id < n; id++ {
			v.tokens = append(v.tokens, fmt.Sprintf("[PAD%d]", id))
			v.types = append(v.types, padType)
		}
		v.merges, v.bos, v.eos, v.pad = merges, llamaBOS, llamaEOT, -1
		return v, nil
	}
	base := n - len(llamaSpecials)
	if n < minVocab || base < 256 {
		return vocab{}, fmt.Errorf("synth: vocab %d is below the minimum %d", n, minVocab)
	}
	v.tokens = append(make([]string, 0, n), tokens[:base]...)
	v.types = append(make([]int32, 0, n), types[:base]...)
	remap := map[int32]int32{}
	for i, id := range llamaSpecials {
		remap[id] = int32(base + i)
		v.tokens = append(v.tokens, llamaToken(tokens, id))
		v.types = append(v.types, types[id])
	}
	v.bos, v.eos, v.pad = remap[llamaBOS], remap[llamaEOT], -1
	v.merges = keptMerges(merges, v.tokens[:base])
	return v, nil
}

// keptMerges are the merges whose parts and result are all kept tokens.
func keptMerges(merges, kept []string) []string {
	in := make(map[string]bool, len(kept))
	for _, t := range kept {
		in[t] = true
	}
	var out []string
	for _, m := range merges {
		left, right, ok := strings.Cut(m, " ")
		if ok && in[left] && in[right] && in[left+right] {
			out = append(out, m)
		}
	}
	return out
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
		return vocab{tokens: t, types: ty, merges: merges, bos: qwen.BOS, eos: qwen.EOS, pad: qwen.PAD,
			pre: "qwen2", template: qwen3ChatTemplate}, nil
	}
	specials := qwen3Specials()
	base := n - len(specials)
	if n < minVocab || base < 256 {
		return vocab{}, fmt.Errorf("synth: vocab %d is below the minimum %d", n, minVocab)
	}
	v := vocab{
		tokens:   append(make([]string, 0, n), tokens[:base]...),
		types:    append(make([]int32, 0, n), types[:base]...),
		pre:      "qwen2",
		template: qwen3ChatTemplate,
	}
	remap := map[int32]int32{}
	for i, s := range specials {
		id := int32(base + i)
		remap[s.ID] = id
		v.tokens = append(v.tokens, s.Text)
		v.types = append(v.types, s.Type)
	}
	v.bos, v.eos, v.pad = remap[qwen.BOS], remap[qwen.EOS], remap[qwen.PAD]

	v.merges = keptMerges(merges, v.tokens[:base])
	return v, nil
}
