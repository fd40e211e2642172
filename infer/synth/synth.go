// Package synth writes synthetic Qwen3 (Bonsai 1.x), Qwen3.5 (qwen35:
// Bonsai 27B, Bonsai 2), Qwen2.5 (qwen2) and Llama (llama) GGUF models: the
// real architecture, shapes and tokenizer (Qwen's, or Llama 3's for llama)
// with seeded random weights, every 2-D weight in one chosen type
// and the norms in F32, as PrismML's files store them. They exercise loaders, kernels and speed without downloading
// a real model, and, being decisive by construction, they make good parity
// tests against llama.cpp.
package synth

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// DefaultLogitStd is the spread of a synthetic model's logits.
const DefaultLogitStd = 8

// Options choose the model.
type Options struct {
	Shape Shape
	Type  gguf.Type // of every 2-D weight, token_embd and output included
	Seed  uint64
	// LogitStd scales the logits: it is their standard deviation before the
	// output rows' own scales (see plan) spread them further; DefaultLogitStd
	// if zero. With the default, top logits are ~30–60 and the best two
	// differ by ~8% of the best (median, measured with llama.cpp), far above
	// the rounding differences between implementations.
	LogitStd float64
	// YaRN, if set, makes the RoPE YaRN-scaled as Bonsai's own files are
	// (rope.scaling.type = yarn); the context becomes Factor times the
	// original one.
	YaRN *YaRN
	// Linear, if above 1, makes the RoPE linearly scaled by it
	// (rope.scaling.type = linear: positions divided by Linear, as Llama 2
	// long-context fine-tunes are); the context becomes Linear times the
	// shape's.
	Linear float64
	// Mix, if set, stores the weights in a llama-quantize mix (Type is
	// then its base type, Q4_K for MixQ4_K_M).
	Mix Mix
}

// YaRN is a YaRN RoPE scaling: the frequencies of a model trained on
// OrigContext positions stretched by Factor.
type YaRN struct {
	Factor      float64
	OrigContext int
}

func (o Options) validate() error {
	if err := o.Shape.Validate(); err != nil {
		return err
	}
	if !supported(o.Type) {
		return fmt.Errorf("synth: %w: %s", ErrUnsupportedType, o.Type)
	}
	for _, t := range o.plan(1) {
		if bs := int64(t.typ.BlockSize()); t.typ == o.Type && t.shape[0]%bs != 0 {
			return fmt.Errorf("synth: shape %s: %s's width %d is not a multiple of the %s block size %d", o.Shape.Name, t.name, t.shape[0], o.Type, bs)
		}
		if !quant.Supported(t.typ) {
			return fmt.Errorf("synth: %w: %s (%s of the %s mix)", ErrUnsupportedType, t.typ, t.name, o.Mix)
		}
	}
	if o.Linear != 0 && (!(o.Linear > 1) || o.YaRN != nil) {
		return fmt.Errorf("synth: linear RoPE factor %g (want > 1, and no YaRN)", o.Linear)
	}
	if y := o.YaRN; y != nil && (!(y.Factor > 1) || y.OrigContext < 1) {
		return fmt.Errorf("synth: YaRN factor %g, original context %d", y.Factor, y.OrigContext)
	}
	if o.LogitStd < 0 {
		return fmt.Errorf("synth: negative logit std %g", o.LogitStd)
	}
	return nil
}

// Size is the file size Write will produce, roughly (metadata excluded).
func (o Options) Size() (int64, error) {
	if err := o.validate(); err != nil {
		return 0, err
	}
	var n int64
	for _, t := range o.plan(1) {
		b, err := t.bytes()
		if err != nil {
			return 0, err
		}
		n += b
	}
	return n, nil
}

// Write generates the model into the file at path, atomically. Tensors are
// generated one at a time into a scratch file next to path, which is then
// memory-mapped for the GGUF writer, so memory use stays small whatever the
// model's size.
func Write(path string, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.LogitStd == 0 {
		o.LogitStd = DefaultLogitStd
	}
	voc, err := vocabFor(o.Shape)
	if err != nil {
		return err
	}
	tensors := o.plan(o.LogitStd)

	scratch, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".data*")
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	defer os.Remove(scratch.Name())
	defer scratch.Close()

	bw := bufio.NewWriterSize(scratch, 1<<20)
	offsets := make([]int64, len(tensors)+1)
	for i, t := range tensors {
		if err := writeTensor(bw, t, o.Seed); err != nil {
			return err
		}
		size, err := t.bytes()
		if err != nil {
			return err
		}
		offsets[i+1] = offsets[i] + size
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	data, unmap, err := mapFile(scratch, offsets[len(tensors)])
	if err != nil {
		return err
	}
	defer unmap()

	w := gguf.NewWriter()
	setMetadata(w, o, voc)
	for i, t := range tensors {
		if err := w.AddTensor(t.name, t.typ, t.shape, data[offsets[i]:offsets[i+1]]); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// plan is the options' tensors, retyped by the mix.
func (o Options) plan(logitStd float64) []tensor {
	return applyMix(plan(o.Shape, o.Type, logitStd), o.Shape, o.Mix)
}

// setMetadata writes the keys llama.cpp's loader and tokenizer read for the
// shape's architecture.
func setMetadata(w *gguf.Writer, o Options, v vocab) {
	s := o.Shape
	a := s.arch()
	w.Set("general.architecture", a)
	label := s.Name
	if s.hybrid() {
		label = a + " " + s.Name
	}
	w.Set("general.name", fmt.Sprintf("bonsai-synth %s %s seed %d", label, o.typeName(), o.Seed))
	if o.Mix == MixQ4_K_M {
		w.Set("general.file_type", uint32(fileTypeQ4_K_M))
	}
	w.Set("general.alignment", uint32(32))
	w.Set(a+".block_count", uint32(s.Layers))
	ctx := uint32(s.Context)
	if y := o.YaRN; y != nil {
		ctx = uint32(float64(y.OrigContext) * y.Factor)
	}
	if o.Linear > 1 {
		ctx = uint32(float64(s.Context) * o.Linear)
	}
	w.Set(a+".context_length", ctx)
	w.Set(a+".embedding_length", uint32(s.Hidden))
	w.Set(a+".feed_forward_length", uint32(s.FFN))
	w.Set(a+".attention.head_count", uint32(s.Heads))
	w.Set(a+".attention.head_count_kv", uint32(s.KVHeads))
	w.Set(a+".attention.key_length", uint32(s.HeadDim))
	w.Set(a+".attention.value_length", uint32(s.HeadDim))
	w.Set(a+".attention.layer_norm_rms_epsilon", float32(s.RMSEps))
	w.Set(a+".rope.freq_base", float32(s.RopeTheta))
	if y := o.YaRN; y != nil {
		w.Set(a+".rope.scaling.type", "yarn")
		w.Set(a+".rope.scaling.factor", float32(y.Factor))
		w.Set(a+".rope.scaling.original_context_length", uint32(y.OrigContext))
	}
	if o.Linear > 1 {
		w.Set(a+".rope.scaling.type", "linear")
		w.Set(a+".rope.scaling.factor", float32(o.Linear))
	}
	if s.hybrid() {
		h := s.Hybrid
		w.Set(a+".rope.dimension_count", uint32(h.RopeDims))
		w.Set(a+".rope.dimension_sections", []int32{int32(h.Sections[0]), int32(h.Sections[1]), int32(h.Sections[2]), int32(h.Sections[3])})
		w.Set(a+".full_attention_interval", uint32(h.AttnInterval))
		w.Set(a+".ssm.conv_kernel", uint32(h.ConvKernel))
		w.Set(a+".ssm.state_size", uint32(h.StateSize))
		w.Set(a+".ssm.group_count", uint32(h.KHeads))
		w.Set(a+".ssm.time_step_rank", uint32(h.VHeads))
		w.Set(a+".ssm.inner_size", uint32(h.VHeads*h.StateSize))
	}
	if s.Window > 0 {
		w.Set(a+".attention.sliding_window", uint32(s.Window))
	}
	if s.arch() == "llama" {
		// llama.cpp's Llama files say how many dims rotate (all).
		w.Set(a+".rope.dimension_count", uint32(s.HeadDim))
		w.Set(a+".vocab_size", uint32(s.Vocab))
	}
	w.Set("tokenizer.ggml.model", "gpt2")
	w.Set("tokenizer.ggml.pre", v.pre)
	w.Set("tokenizer.ggml.tokens", v.tokens)
	w.Set("tokenizer.ggml.token_type", v.types)
	w.Set("tokenizer.ggml.merges", v.merges)
	w.Set("tokenizer.ggml.bos_token_id", uint32(v.bos))
	w.Set("tokenizer.ggml.eos_token_id", uint32(v.eos))
	if v.pad >= 0 {
		w.Set("tokenizer.ggml.padding_token_id", uint32(v.pad))
	}
	w.Set("tokenizer.ggml.add_bos_token", v.addBOS)
	w.Set("tokenizer.chat_template", v.template)
}
