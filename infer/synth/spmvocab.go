package synth

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/llamaspm"
)

// SPMVocab is a SentencePiece vocabulary (tokenizer.ggml.model "llama", as
// Llama 2, Mistral, Phi-3 and Gemma 3 files carry) for synthetic models.
// Its fields are written as they are: append tokens, or clear
// AddSpacePrefix for a Gemma-style vocabulary, before SetSPMVocab.
type SPMVocab struct {
	Tokens []string
	Scores []float32
	Types  []int32

	BOS, EOS, UNK int32
	// AddBOS starts prompts with BOS; AddSpacePrefix puts a space before
	// the text (and after each special token) before encoding, as Llama 2's
	// tokenizer does and Gemma's does not.
	AddBOS, AddSpacePrefix bool
}

var (
	llamaSPMOnce sync.Once
	llamaSPM     SPMVocab
	llamaSPMErr  error
)

// minSPMVocab keeps <unk>, <s>, </s>, the 256 byte tokens and "▁".
const minSPMVocab = llamaspm.FirstByte + 256 + 1

// spaceToken is "▁", the space: a vocabulary without it spells a lone space
// in bytes, which decode to "▁", not " ".
const spaceToken = "\u2581"

// unusedType is ggml's token type for unused tokens.
const unusedType = 5

// LlamaSPMVocab is llama.cpp's Llama 2 vocabulary (package llamaspm) with n
// tokens: cut to its first n−1, which are the specials, the byte tokens and
// then the pieces best score first, and "▁" last, so that text still
// tokenizes and decodes, in more and shorter pieces; or padded beyond its
// 32,000 with unused "<unused_N>" tokens that no text merges into.
func LlamaSPMVocab(n int) (SPMVocab, error) {
	llamaSPMOnce.Do(func() {
		f, err := gguf.Parse(llamaspm.VocabGGUF)
		if err != nil {
			llamaSPMErr = fmt.Errorf("synth: reading the embedded Llama SentencePiece vocab: %w", err)
			return
		}
		var ok1, ok2, ok3 bool
		llamaSPM.Tokens, ok1 = f.KV.Strings("tokenizer.ggml.tokens")
		llamaSPM.Scores, ok2 = f.KV.Float32s("tokenizer.ggml.scores")
		llamaSPM.Types, ok3 = f.KV.Int32s("tokenizer.ggml.token_type")
		if !ok1 || !ok2 || !ok3 || len(llamaSPM.Tokens) != llamaspm.VocabSize ||
			len(llamaSPM.Scores) != llamaspm.VocabSize || len(llamaSPM.Types) != llamaspm.VocabSize {
			llamaSPMErr = fmt.Errorf("synth: the embedded Llama vocab lacks tokens, scores or token types of %d tokens", llamaspm.VocabSize)
		} else if !slices.Contains(llamaSPM.Tokens, spaceToken) {
			llamaSPMErr = fmt.Errorf("synth: the embedded Llama vocab has no %q token", spaceToken)
		}
	})
	if llamaSPMErr != nil {
		return SPMVocab{}, llamaSPMErr
	}
	if n < int(minSPMVocab) {
		return SPMVocab{}, fmt.Errorf("synth: SentencePiece vocab %d is below the minimum %d", n, minSPMVocab)
	}
	keep := min(n, llamaspm.VocabSize)
	if n < llamaspm.VocabSize {
		keep = n - 1
	}
	v := SPMVocab{
		Tokens: append(make([]string, 0, n), llamaSPM.Tokens[:keep]...),
		Scores: append(make([]float32, 0, n), llamaSPM.Scores[:keep]...),
		Types:  append(make([]int32, 0, n), llamaSPM.Types[:keep]...),
		BOS:    llamaspm.BOS, EOS: llamaspm.EOS, UNK: llamaspm.UNK,
		AddBOS: true, AddSpacePrefix: true,
	}
	if keep < n && keep < llamaspm.VocabSize {
		space := slices.Index(llamaSPM.Tokens, spaceToken)
		v.Tokens = append(v.Tokens, spaceToken)
		v.Scores = append(v.Scores, llamaSPM.Scores[space])
		v.Types = append(v.Types, llamaSPM.Types[space])
		keep++
	}
	for id := keep; id < n; id++ {
		v.Tokens = append(v.Tokens, fmt.Sprintf("<unused_%d>", id))
		v.Scores = append(v.Scores, 0)
		v.Types = append(v.Types, unusedType)
	}
	return v, nil
}

// Add appends a token (a special one, say <start_of_turn> as a control
// token) and returns its id.
func (v *SPMVocab) Add(text string, typ int32) int32 {
	v.Tokens = append(v.Tokens, text)
	v.Scores = append(v.Scores, 0)
	v.Types = append(v.Types, typ)
	return int32(len(v.Tokens) - 1)
}

// SetSPMVocab writes v as the tokenizer.ggml.* keys llama.cpp reads for a
// SentencePiece vocabulary.
func SetSPMVocab(w *gguf.Writer, v SPMVocab) {
	w.Set("tokenizer.ggml.model", "llama")
	w.Set("tokenizer.ggml.pre", "default")
	w.Set("tokenizer.ggml.tokens", v.Tokens)
	w.Set("tokenizer.ggml.scores", v.Scores)
	w.Set("tokenizer.ggml.token_type", v.Types)
	w.Set("tokenizer.ggml.bos_token_id", uint32(v.BOS))
	w.Set("tokenizer.ggml.eos_token_id", uint32(v.EOS))
	w.Set("tokenizer.ggml.unknown_token_id", uint32(v.UNK))
	w.Set("tokenizer.ggml.add_bos_token", v.AddBOS)
	w.Set("tokenizer.ggml.add_eos_token", false)
	w.Set("tokenizer.ggml.add_space_prefix", v.AddSpacePrefix)
}

// ReplaceVocab rewrites the model at path with v as its tokenizer in place
// of the one it has (Write gives every model Qwen's): the other metadata
// and the tensors stay as they are, the chat template goes with the old
// tokenizer. The model's vocabulary size (token_embd's rows) must be v's.
func ReplaceVocab(path string, v SPMVocab) error {
	f, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	defer f.Close()
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Shape) != 2 {
		return fmt.Errorf("synth: %s has no 2-D token_embd.weight", path)
	}
	if rows := emb.Shape[1]; rows != int64(len(v.Tokens)) {
		return fmt.Errorf("synth: %s embeds %d tokens, the vocabulary has %d", path, rows, len(v.Tokens))
	}
	w := gguf.NewWriter()
	for _, k := range f.KV.Keys() {
		if !strings.HasPrefix(k, "tokenizer.") {
			val, _ := f.KV.Get(k)
			w.Set(k, val)
		}
	}
	SetSPMVocab(w, v)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if err := w.AddTensor(t.Name, t.Type, t.Shape, f.Data(t)); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}
