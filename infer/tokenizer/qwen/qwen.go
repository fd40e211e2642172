// Package qwen carries the real Qwen tokenizer so that tools can write it into
// the GGUF files they generate: llama.cpp's ggml-vocab-qwen2.gguf (the Qwen2
// vocab, merges and pre-tokenizer) plus the 23 tokens Qwen3 added on top of it.
//
// The Qwen2 vocab marks ids 151646–151935 as "[PAD<id>]" placeholders; a Qwen3
// tokenizer is that vocab with AddedTokens written over the first 23 of them and
// EOS set to <|im_end|>.
package qwen

import (
	_ "embed"
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
)

// VocabGGUF is llama.cpp's ggml-vocab-qwen2.gguf: a tensor-less GGUF holding
// tokenizer.ggml.{model,pre,tokens,token_type,merges} and the special ids.
//
//go:embed ggml-vocab-qwen2.gguf
var VocabGGUF []byte

// Token types as ggml stores them in tokenizer.ggml.token_type.
const (
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Special ids of a Qwen3 tokenizer (Bonsai 1.x uses these).
const (
	EndOfText  int32 = 151643 // <|endoftext|>: bos and pad
	IMStart    int32 = 151644 // <|im_start|>
	IMEnd      int32 = 151645 // <|im_end|>: eos, end of a chat turn
	ThinkStart int32 = 151667 // <think>
	ThinkEnd   int32 = 151668 // </think>

	BOS = EndOfText
	PAD = EndOfText
	EOS = IMEnd

	// VocabSize is the number of embedding rows of Qwen2/Qwen3 models:
	// 151,669 real tokens padded to a multiple of 128.
	VocabSize = 151936
)

// AddedToken is one token Qwen3 defines beyond the Qwen2 vocab.
type AddedToken struct {
	ID   int32
	Text string
	Type int32
}

// AddedTokens are Qwen3's tokens 151646–151668, in id order.
var AddedTokens = []AddedToken{
	{151646, "<|object_ref_start|>", TypeControl},
	{151647, "<|object_ref_end|>", TypeControl},
	{151648, "<|box_start|>", TypeControl},
	{151649, "<|box_end|>", TypeControl},
	{151650, "<|quad_start|>", TypeControl},
	{151651, "<|quad_end|>", TypeControl},
	{151652, "<|vision_start|>", TypeControl},
	{151653, "<|vision_end|>", TypeControl},
	{151654, "<|vision_pad|>", TypeControl},
	{151655, "<|image_pad|>", TypeControl},
	{151656, "<|video_pad|>", TypeControl},
	{151657, "<tool_call>", TypeUserDefined},
	{151658, "</tool_call>", TypeUserDefined},
	{151659, "<|fim_prefix|>", TypeUserDefined},
	{151660, "<|fim_middle|>", TypeUserDefined},
	{151661, "<|fim_suffix|>", TypeUserDefined},
	{151662, "<|fim_pad|>", TypeUserDefined},
	{151663, "<|repo_name|>", TypeUserDefined},
	{151664, "<|file_sep|>", TypeUserDefined},
	{151665, "<tool_response>", TypeUserDefined},
	{151666, "</tool_response>", TypeUserDefined},
	{151667, "<think>", TypeUserDefined},
	{151668, "</think>", TypeUserDefined},
}

// Qwen3 applies AddedTokens to a copy of a Qwen2 token list and type list
// (as read from VocabGGUF), returning the Qwen3 lists. The inputs are not
// modified. Lists shorter than the highest added id are an error left to the
// caller to avoid: Qwen3 returns them unchanged past their end.
func Qwen3(tokens []string, types []int32) ([]string, []int32) {
	outTokens := append([]string(nil), tokens...)
	outTypes := append([]int32(nil), types...)
	for _, t := range AddedTokens {
		if int(t.ID) < len(outTokens) {
			outTokens[t.ID] = t.Text
		}
		if int(t.ID) < len(outTypes) {
			outTypes[t.ID] = t.Type
		}
	}
	return outTokens, outTypes
}

// Vocab is a Qwen3 tokenizer as GGUF stores it.
type Vocab struct {
	Model, Pre string   // "gpt2", "qwen2"
	Tokens     []string // VocabSize entries, AddedTokens applied
	Types      []int32
	Merges     []string
}

// Qwen3Vocab reads VocabGGUF and applies AddedTokens: the tokenizer of Qwen3
// and Bonsai 1.x. Pair it with BOS/PAD = EndOfText, EOS = IMEnd and no BOS
// prepended.
func Qwen3Vocab() (*Vocab, error) {
	f, err := gguf.Parse(VocabGGUF)
	if err != nil {
		return nil, fmt.Errorf("qwen: embedded vocab: %w", err)
	}
	v := &Vocab{}
	var ok [5]bool
	v.Model, ok[0] = f.KV.String("tokenizer.ggml.model")
	v.Pre, ok[1] = f.KV.String("tokenizer.ggml.pre")
	tokens, ok2 := f.KV.Strings("tokenizer.ggml.tokens")
	types, ok3 := f.KV.Int32s("tokenizer.ggml.token_type")
	v.Merges, ok[4] = f.KV.Strings("tokenizer.ggml.merges")
	ok[2], ok[3] = ok2, ok3
	for i, good := range ok {
		if !good {
			return nil, fmt.Errorf("qwen: embedded vocab lacks tokenizer key %d of model/pre/tokens/token_type/merges", i)
		}
	}
	if len(tokens) != VocabSize || len(types) != VocabSize {
		return nil, fmt.Errorf("qwen: embedded vocab has %d tokens and %d types, want %d", len(tokens), len(types), VocabSize)
	}
	v.Tokens, v.Types = Qwen3(tokens, types)
	return v, nil
}
