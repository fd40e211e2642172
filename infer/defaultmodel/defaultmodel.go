// Package defaultmodel embeds bonsai-tiny, the model bonsai runs when no model
// is configured: a toy 1-bit Qwen3 (6 layers, hidden 384, every 2-D weight
// Q1_0, tied embeddings, the real Qwen3 tokenizer) trained in four minutes
// on the King James Bible and the Dhammapada. It writes KJV-flavoured
// English in the chat template's shape and knows nothing else; it is not a
// Bonsai model. tools/train-default builds it (see its README).
package defaultmodel

import (
	_ "embed"
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Name is the model's general.name.
const Name = "bonsai-tiny"

// GGUF is the model file.
//
//go:embed bonsai-tiny.gguf
var GGUF []byte

// Path is what the embedded file's Path says in place of a file name.
const Path = "(embedded) " + Name

// Open parses the embedded file. Tensor data refers to GGUF in place; the
// returned file needs no Close (closing it is harmless). Its Path is Path.
func Open() (*gguf.File, error) {
	f, err := gguf.Parse(GGUF)
	if err != nil {
		return nil, fmt.Errorf("embedded default model: %w", err)
	}
	f.Path = Path
	return f, nil
}
