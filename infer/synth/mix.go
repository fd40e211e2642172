package synth

import (
	"fmt"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Mix is a llama-quantize file type that stores different weights in
// different types; MixNone stores every 2-D weight in Options.Type.
type Mix int

const (
	MixNone Mix = iota
	// MixQ4_K_M is llama-quantize's Q4_K_M: Q4_K, with Q6_K for the output
	// (and a tied token_embd) and for attn_v and ffn_down on the layers
	// useMoreBits picks; a weight whose rows are no multiple of 256 falls
	// back to Q5_0 (Q4_K) or Q8_0 (Q6_K), as llama.cpp's
	// tensor_type_fallback does.
	MixQ4_K_M
)

// fileTypeQ4_K_M is llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M, the
// general.file_type of such a file.
const fileTypeQ4_K_M = 15

// ParseMix reads a mix name ("q4_k_m", any case); ok is false for a name
// that is no mix (a plain type, see ParseType).
func ParseMix(name string) (m Mix, base gguf.Type, ok bool) {
	if strings.EqualFold(name, "q4_k_m") {
		return MixQ4_K_M, gguf.Q4_K, true
	}
	return MixNone, 0, false
}

func (m Mix) String() string {
	if m == MixQ4_K_M {
		return "Q4_K_M"
	}
	return "none"
}

// useMoreBits is llama-quantize's choice of the layers (of n) whose attn_v
// and ffn_down get more bits: the first and last eighth and every third
// between.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// applyMix retypes the quantized tensors of a plan (in file order, which
// the layer counters follow as llama-quantize's do).
func applyMix(ts []tensor, s Shape, m Mix) []tensor {
	if m != MixQ4_K_M {
		return ts
	}
	var nV, nDown int
	for _, t := range ts {
		switch {
		case strings.HasSuffix(t.name, ".attn_v.weight"):
			nV++
		case strings.HasSuffix(t.name, ".ffn_down.weight"):
			nDown++
		}
	}
	var iV, iDown int
	out := make([]tensor, len(ts))
	for k, t := range ts {
		out[k] = t
		if len(t.shape) < 2 || t.typ == gguf.F32 || t.values != nil {
			continue
		}
		typ := gguf.Q4_K
		switch {
		case t.name == "output.weight" || (s.Tied && t.name == "token_embd.weight"):
			// llama.cpp quantizes a tied embedding as the output
			// and picks Q8_0 outright for rows no K-quant fits.
			typ = gguf.Q6_K
			if t.shape[0]%256 != 0 {
				typ = gguf.Q8_0
			}
		case strings.HasSuffix(t.name, ".attn_v.weight"):
			if useMoreBits(iV, nV) {
				typ = gguf.Q6_K
			}
			iV++
		case strings.HasSuffix(t.name, ".ffn_down.weight"):
			if useMoreBits(iDown, nDown) {
				typ = gguf.Q6_K
			}
			iDown++
		}
		out[k].typ = fallback(typ, t.shape[0])
	}
	return out
}

// fallback is llama-quantize's type for a K-quant whose rows (ne0) are no
// multiple of its 256-element block.
func fallback(t gguf.Type, ne0 int64) gguf.Type {
	if ne0%int64(t.BlockSize()) == 0 {
		return t
	}
	switch t {
	case gguf.Q4_K:
		t = gguf.Q5_0
	case gguf.Q5_K:
		t = gguf.Q5_1
	case gguf.Q6_K:
		t = gguf.Q8_0
	}
	if ne0%int64(t.BlockSize()) != 0 {
		return gguf.F16
	}
	return t
}

// mixName is the type column of a mixed file's general.name.
func (o Options) typeName() string {
	if o.Mix != MixNone {
		return o.Mix.String()
	}
	return fmt.Sprint(o.Type)
}
