package infer_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// qwen35File writes synth's tiny qwen35 model (vocab cut to 1024) in typ.
func qwen35File(t *testing.T, typ gguf.Type) *gguf.File {
	t.Helper()
	s, err := synth.ArchShape("qwen35", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = 1024
	path := filepath.Join(t.TempDir(), "qwen35.gguf")
	if err := synth.Write(path, synth.Options{Shape: s, Type: typ, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	return openPath(t, path)
}

// openPath opens the GGUF at path until the test ends.
func openPath(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// rewrite copies f with metadata keys set (a nil value deletes the key) and
// extra tensors added.
func rewrite(t *testing.T, f *gguf.File, set map[string]any, extra map[string][]int64) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, k := range f.KV.Keys() {
		if _, ok := set[k]; ok {
			continue
		}
		v, _ := f.KV.Get(k)
		w.Set(k, v.Any())
	}
	for k, v := range set {
		if v != nil {
			w.Set(k, v)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := w.AddTensor(ti.Name, ti.Type, ti.Shape, f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	for name, shape := range extra {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		if err := w.AddTensor(name, gguf.F32, shape, make([]byte, 4*n)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "rewritten.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func TestQwen35Params(t *testing.T) {
	f := qwen35File(t, gguf.F32)
	p, err := infer.ReadQwen35Params(f)
	if err != nil {
		t.Fatal(err)
	}
	if p.Layers != 6 || p.Embed != 256 || p.Heads != 2 || p.KVHeads != 1 || p.HeadDim != 128 || p.Rope.Dims != 32 || p.Rope.HeadDim != 128 {
		t.Errorf("dense sizes %+v", p.Hyperparams)
	}
	if p.ConvKernel != 4 || p.StateSize != 64 || p.KHeads != 2 || p.VHeads != 4 || p.Channels() != 512 {
		t.Errorf("DeltaNet sizes %+v, channels %d", p, p.Channels())
	}
	if want := []bool{true, true, false, true, true, false}; !slices.Equal(p.Recurrent, want) {
		t.Errorf("recurrent layers %v, want %v (every third is attention)", p.Recurrent, want)
	}
	if p.KVLayers != 2 || infer.KVBytesPerToken(p.Hyperparams, infer.KVTypes{}) != 2*2*128*2 {
		t.Errorf("%d KV layers, %d KV bytes per token: want the 2 attention layers' K and V", p.KVLayers, infer.KVBytesPerToken(p.Hyperparams, infer.KVTypes{}))
	}
	if want := float32(1 / math.Sqrt(128)); p.AttnScale != want {
		t.Errorf("attention scale %v, want %v", p.AttnScale, want)
	}

	interval := rewrite(t, f, map[string]any{"qwen35.full_attention_interval": uint32(2)}, nil)
	if p, err := infer.ReadQwen35Params(interval); err != nil || p.AttentionLayers() != 3 {
		t.Errorf("interval 2: %d attention layers, %v; want 3", p.AttentionLayers(), err)
	}
	flags := []bool{false, true, true, true, true, false}
	array := rewrite(t, f, map[string]any{"qwen35.attention.recurrent_layers": flags}, nil)
	if p, err := infer.ReadQwen35Params(array); err != nil || !slices.Equal(p.Recurrent, flags) {
		t.Errorf("recurrent_layers %v: got %v, %v", flags, p.Recurrent, err)
	}
}

func TestQwen35ParamsErrors(t *testing.T) {
	f := qwen35File(t, gguf.F32)
	for name, tc := range map[string]struct {
		set  map[string]any
		want error
	}{
		"inner size":          {map[string]any{"qwen35.ssm.inner_size": uint32(300)}, infer.ErrBadShape},
		"v heads vs k heads":  {map[string]any{"qwen35.ssm.group_count": uint32(3)}, infer.ErrBadShape},
		"no conv kernel":      {map[string]any{"qwen35.ssm.conv_kernel": nil}, gguf.ErrNoKey},
		"no sections":         {map[string]any{"qwen35.rope.dimension_sections": nil}, gguf.ErrNoKey},
		"sections not text":   {map[string]any{"qwen35.rope.dimension_sections": []int32{16, 0, 0, 0}}, infer.ErrUnsupportedArch},
		"short flags":         {map[string]any{"qwen35.attention.recurrent_layers": []bool{true, false}}, infer.ErrBadShape},
		"no attention layer":  {map[string]any{"qwen35.attention.recurrent_layers": []bool{true, true, true, true, true, true}}, infer.ErrBadShape},
		"nextn takes all":     {map[string]any{"qwen35.nextn_predict_layers": uint32(6)}, infer.ErrBadShape},
		"interval zero":       {map[string]any{"qwen35.full_attention_interval": uint32(0)}, infer.ErrBadShape},
		"rope dims past head": {map[string]any{"qwen35.rope.dimension_count": uint32(256)}, infer.ErrBadShape},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := infer.ReadQwen35Params(rewrite(t, f, tc.set, nil))
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
}

func TestQwen35Specs(t *testing.T) {
	m, err := infer.Load(qwen35File(t, gguf.Q8_0), infer.Options{Backend: "cpu", Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if kv := m.KVSpec(); kv != (infer.KVSpec{Layers: 2, Context: 64, KVHeads: 1, HeadDim: 128}) {
		t.Errorf("KV cache %+v: want the two attention layers only", kv)
	}
	if m.Variant.Name != "Qwen35 (other)" || m.Variant.Bonsai {
		t.Errorf("variant %+v", m.Variant)
	}
}

// TestQwen35NextN: trailing NextN (MTP) blocks are neither bound nor run, so
// a file whose extra block lacks most tensors still loads and gives the
// trunk's logits.
func TestQwen35NextN(t *testing.T) {
	f := qwen35File(t, gguf.F32)
	mtp := rewrite(t, f, map[string]any{"qwen35.block_count": uint32(7), "qwen35.nextn_predict_layers": uint32(1)},
		map[string][]int64{"blk.6.nextn.eh_proj.weight": {512, 256}})
	tokens := []int32{5, 17, 300, 2, 99}
	want := logitsOf(t, f, tokens, 0)
	got := logitsOf(t, mtp, tokens, 0)
	if !slices.Equal(got, want) {
		t.Fatal("the NextN block changed the trunk's logits")
	}
}

func logitsOf(t *testing.T, f *gguf.File, tokens []int32, batch int) []float32 {
	t.Helper()
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 128, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Forward(tokens, 0); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(m.Logits())
}

// TestQwen35Prefill: a prompt runs as batched passes, and whether it runs as
// one pass, several or one token at a time, and whether it is continued
// later from where a pass stopped, the logits agree within rounding (the
// delta rule is sequential in every form; only the matrix products'
// blocking may differ). A restart at position 0 forgets the past.
func TestQwen35Prefill(t *testing.T) {
	f := qwen35File(t, gguf.Q8_0)
	tokens := make([]int32, 40)
	for i := range tokens {
		tokens[i] = int32((i*37 + 11) % 1000)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	run := func(parts ...int) []float32 {
		t.Helper()
		pos := 0
		for _, n := range parts {
			if err := m.Forward(tokens[pos:pos+n], pos); err != nil {
				t.Fatal(err)
			}
			pos += n
		}
		if pos != len(tokens) {
			t.Fatalf("parts cover %d of %d tokens", pos, len(tokens))
		}
		return slices.Clone(m.Logits())
	}
	whole := run(40)
	ones := make([]int, 40)
	for i := range ones {
		ones[i] = 1
	}
	for name, got := range map[string][]float32{
		"token by token":       run(ones...),
		"continued at 25":      run(25, 15),
		"short passes":         run(3, 1, 2, 30, 4),
		"whole again (reset)":  run(40),
		"with a batch limit 8": logitsOf(t, f, tokens, 8),
	} {
		worst := 0.0
		for i := range whole {
			worst = math.Max(worst, math.Abs(float64(got[i]-whole[i]))/(1+math.Abs(float64(whole[i]))))
		}
		// Q8_0 activations: a value on a rounding boundary may take the
		// neighbouring code, one step of 1/128 on one element.
		if worst > 1.0/128 {
			t.Errorf("%s: logits differ from one pass by %.3g·(|logit|+1)", name, worst)
		}
	}
	if got := run(40); !slices.Equal(got, whole) {
		t.Error("rerunning the prompt from position 0 did not reproduce its logits: state leaked")
	}
	// A different past must change the continuation, or the checks above
	// could not tell a carried state from a reset one.
	if err := m.Forward(tokens[20:], 0); err != nil {
		t.Fatal(err)
	}
	fresh := m.Logits()
	if slices.Equal(fresh, whole) {
		t.Fatal("the last 20 tokens alone give the 40-token logits: the state carries nothing")
	}
}

// TestQwen35FusedAttention: a file whose attention layers fuse q|gate, k
// and v into attn_qkv (as llama.cpp's loader also accepts) gives the logits
// of the same weights apart; attention biases, which qwen35 never has, are
// refused rather than ignored.
func TestQwen35FusedAttention(t *testing.T) {
	f := qwen35File(t, gguf.Q8_0)
	fused := func(bias bool) *gguf.File {
		w := gguf.NewWriter()
		for _, k := range f.KV.Keys() {
			v, _ := f.KV.Get(k)
			w.Set(k, v.Any())
		}
		apart := map[string]bool{}
		for _, layer := range []int{2, 5} { // the attention layers
			for _, p := range []string{"q", "k", "v"} {
				apart[fmt.Sprintf("blk.%d.attn_%s.weight", layer, p)] = true
			}
		}
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			if apart[ti.Name] {
				continue
			}
			if err := w.AddTensor(ti.Name, ti.Type, ti.Shape, f.Data(ti)); err != nil {
				t.Fatal(err)
			}
		}
		for _, layer := range []int{2, 5} {
			var data []byte
			rows := int64(0)
			for _, p := range []string{"q", "k", "v"} {
				ti, _ := f.Tensor(fmt.Sprintf("blk.%d.attn_%s.weight", layer, p))
				data = append(data, f.Data(ti)...)
				rows += ti.Shape[1]
			}
			if err := w.AddTensor(fmt.Sprintf("blk.%d.attn_qkv.weight", layer), gguf.Q8_0, []int64{256, rows}, data); err != nil {
				t.Fatal(err)
			}
		}
		if bias {
			if err := w.AddTensor("blk.2.attn_k.bias", gguf.F32, []int64{128}, make([]byte, 512)); err != nil {
				t.Fatal(err)
			}
		}
		path := filepath.Join(t.TempDir(), "fused.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		g, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	tokens := []int32{7, 300, 12, 999, 45, 45, 3}
	if got, want := logitsOf(t, fused(false), tokens, 0), logitsOf(t, f, tokens, 0); !slices.Equal(got, want) {
		t.Fatal("fused attention projections changed the logits")
	}
	if _, err := infer.Load(fused(true), infer.Options{Backend: "cpu", Context: 64}); !errors.Is(err, infer.ErrUnsupportedArch) {
		t.Fatalf("attention bias: %v, want ErrUnsupportedArch", err)
	}
}
