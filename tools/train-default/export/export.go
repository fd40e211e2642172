package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/quant"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/qwen"
)

// Name is general.name of the exported model.
const Name = "bonsai-tiny"

// config is train.py's model configuration.
type config struct {
	Vocab     int     `json:"n_vocab"`
	Embd      int     `json:"n_embd"`
	Layers    int     `json:"n_layer"`
	Heads     int     `json:"n_head"`
	HeadsKV   int     `json:"n_head_kv"`
	HeadDim   int     `json:"head_dim"`
	FF        int     `json:"n_ff"`
	Eps       float64 `json:"eps"`
	RopeTheta float64 `json:"rope_theta"`
	CtxTrain  int     `json:"n_ctx_train"`
}

type tensor struct {
	Name   string  `json:"name"`
	Type   string  `json:"type"` // "Q1_0" or "F32"
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"`
	Size   int64   `json:"size"`
	data   []byte
}

type modelBin struct {
	Config  config   `json:"config"`
	Tensors []tensor `json:"tensors"`
}

var errFormat = errors.New("not a train.py model.bin")

// parseModelBin reads u64 header length, a JSON header and the tensor data.
func parseModelBin(data []byte) (*modelBin, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%w: %d bytes", errFormat, len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("%w: header of %d bytes in a file of %d", errFormat, n, len(data))
	}
	var m modelBin
	if err := json.Unmarshal(data[8:8+n], &m); err != nil {
		return nil, fmt.Errorf("%w: header: %w", errFormat, err)
	}
	body := data[8+n:]
	for i := range m.Tensors {
		t := &m.Tensors[i]
		if t.Offset < 0 || t.Size < 0 || t.Offset > int64(len(body)) || t.Size > int64(len(body))-t.Offset {
			return nil, fmt.Errorf("%w: tensor %q at %d+%d outside %d data bytes", errFormat, t.Name, t.Offset, t.Size, len(body))
		}
		t.data = body[t.Offset : t.Offset+t.Size]
	}
	return &m, nil
}

// buildGGUF lays the model out as a qwen3 GGUF.
func buildGGUF(m *modelBin) (*gguf.Writer, error) {
	c := m.Config
	if c.Vocab != qwen.VocabSize {
		return nil, fmt.Errorf("vocab of %d rows, want the Qwen3 tokenizer's %d", c.Vocab, qwen.VocabSize)
	}
	v, err := qwen.Qwen3Vocab()
	if err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	w.Set("general.architecture", "qwen3")
	w.Set("general.name", Name)
	w.Set("general.description", "A toy 1-bit Qwen3 trained in minutes on the King James Bible and the Dhammapada; bonsai's default model. Not a Bonsai model.")
	w.Set("general.file_type", uint32(40)) // MOSTLY_Q1_0
	w.Set("general.quantization_version", uint32(2))
	w.Set("qwen3.block_count", uint32(c.Layers))
	w.Set("qwen3.context_length", uint32(c.CtxTrain))
	w.Set("qwen3.embedding_length", uint32(c.Embd))
	w.Set("qwen3.feed_forward_length", uint32(c.FF))
	w.Set("qwen3.attention.head_count", uint32(c.Heads))
	w.Set("qwen3.attention.head_count_kv", uint32(c.HeadsKV))
	w.Set("qwen3.attention.key_length", uint32(c.HeadDim))
	w.Set("qwen3.attention.value_length", uint32(c.HeadDim))
	w.Set("qwen3.attention.layer_norm_rms_epsilon", float32(c.Eps))
	w.Set("qwen3.rope.freq_base", float32(c.RopeTheta))
	w.Set("tokenizer.ggml.model", v.Model)
	w.Set("tokenizer.ggml.pre", v.Pre)
	w.Set("tokenizer.ggml.tokens", v.Tokens)
	w.Set("tokenizer.ggml.token_type", v.Types)
	w.Set("tokenizer.ggml.merges", v.Merges)
	w.Set("tokenizer.ggml.bos_token_id", uint32(qwen.BOS))
	w.Set("tokenizer.ggml.eos_token_id", uint32(qwen.EOS))
	w.Set("tokenizer.ggml.padding_token_id", uint32(qwen.PAD))
	w.Set("tokenizer.ggml.add_bos_token", false)
	w.Set("tokenizer.chat_template", chat.Qwen3Source)

	for _, t := range m.Tensors {
		switch t.Type {
		case "F32":
			if err := w.AddTensor(t.Name, gguf.F32, t.Shape, t.data); err != nil {
				return nil, err
			}
		case "Q1_0":
			data, err := requantize(t)
			if err != nil {
				return nil, err
			}
			if err := w.AddTensor(t.Name, gguf.Q1_0, t.Shape, data); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: tensor %q of type %q", errFormat, t.Name, t.Type)
		}
	}
	return w, nil
}

// requantize decodes train.py's Q1_0 blocks and quantizes them again with
// quant.QuantizeRow. A 1-bit weight (±d per block) is a fixed point of the
// quantizer, so any difference means train.py and bonsai disagree on the
// format: that is an error, not something to paper over.
func requantize(t tensor) ([]byte, error) {
	if len(t.Shape) != 2 {
		return nil, fmt.Errorf("tensor %q: shape %v is not 2-D", t.Name, t.Shape)
	}
	cols, rows := int(t.Shape[0]), int(t.Shape[1])
	rowBytes, err := gguf.Q1_0.RowBytes(int64(cols))
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if int64(len(t.data)) != rowBytes*int64(rows) {
		return nil, fmt.Errorf("tensor %q: %d bytes, want %d rows of %d", t.Name, len(t.data), rows, rowBytes)
	}
	out := make([]byte, len(t.data))
	row := make([]float32, cols)
	for r := range rows {
		src := t.data[int64(r)*rowBytes : int64(r+1)*rowBytes]
		dst := out[int64(r)*rowBytes : int64(r+1)*rowBytes]
		if err := quant.DequantizeRow(gguf.Q1_0, src, row); err != nil {
			return nil, fmt.Errorf("tensor %q row %d: %w", t.Name, r, err)
		}
		if err := quant.QuantizeRow(gguf.Q1_0, row, dst); err != nil {
			return nil, fmt.Errorf("tensor %q row %d: %w", t.Name, r, err)
		}
		if !bytes.Equal(src, dst) {
			return nil, fmt.Errorf("tensor %q row %d: requantized Q1_0 differs from train.py's blocks", t.Name, r)
		}
	}
	return out, nil
}
