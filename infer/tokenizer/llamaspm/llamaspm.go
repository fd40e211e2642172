// Package llamaspm carries a real SentencePiece vocabulary so that tests and
// tools can tokenize with it, or write it into the GGUF files they generate:
// llama.cpp's ggml-vocab-llama-spm.gguf, Llama 2's 32,000 tokens with their
// scores and types (<unk> 0, <s> 1, </s> 2, the byte tokens <0x00>–<0xFF>
// at 3–258, then the pieces, best score first).
package llamaspm

import _ "embed"

// VocabGGUF is llama.cpp's ggml-vocab-llama-spm.gguf: a tensor-less GGUF
// holding tokenizer.ggml.{model,pre,tokens,scores,token_type}, the special
// ids and add_bos_token/add_eos_token.
//
//go:embed ggml-vocab-llama-spm.gguf
var VocabGGUF []byte

// Special ids and sizes of the vocabulary.
const (
	UNK       int32 = 0
	BOS       int32 = 1
	EOS       int32 = 2
	FirstByte int32 = 3 // <0x00>; <0xFF> is FirstByte+255
	VocabSize       = 32000
)
