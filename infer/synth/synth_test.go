package synth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/quant"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/qwen"
)

// small is a tiny model with a cut vocab: quick to write in every test.
func small(t gguf.Type) Options {
	s := Shapes["tiny"]
	s.Vocab = 1024
	return Options{Shape: s, Type: t, Seed: 7}
}

func write(t *testing.T, o Options) (*gguf.File, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := Write(path, o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	return f, b
}

func TestShapes(t *testing.T) {
	// The real shapes, as the published Bonsai files have them.
	want := map[string][7]int{ // layers, hidden, heads, kv, ffn, vocab, tied
		"1.7b": {28, 2048, 16, 8, 6144, 151936, 1},
		"4b":   {36, 2560, 32, 8, 9728, 151936, 1},
		"8b":   {36, 4096, 32, 8, 12288, 151936, 0},
	}
	for name, w := range want {
		s, err := ShapeByName(name)
		if err != nil {
			t.Fatal(err)
		}
		tied := 0
		if s.Tied {
			tied = 1
		}
		got := [7]int{s.Layers, s.Hidden, s.Heads, s.KVHeads, s.FFN, s.Vocab, tied}
		if got != w || s.HeadDim != 128 {
			t.Errorf("%s: got %v head dim %d, want %v head dim 128", name, got, s.HeadDim, w)
		}
		if err := s.Validate(); err != nil {
			t.Error(err)
		}
	}
	// Q1_0 tensor bytes of the real Bonsai files of these shapes.
	for name, bytes := range map[string]int64{"1.7b": 242434048, "4b": 566416384, "8b": 1153011712} {
		n, err := Options{Shape: Shapes[name], Type: gguf.Q1_0}.Size()
		if err != nil || n != bytes {
			t.Errorf("%s Q1_0 tensor bytes = %d, %v; want %d", name, n, err, bytes)
		}
	}
	if _, err := ShapeByName("70b"); !errors.Is(err, ErrUnknownShape) {
		t.Errorf("ShapeByName(70b) = %v, want ErrUnknownShape", err)
	}
	if got := ShapeNames(); strings.Join(got, ",") != "tiny,1.7b,4b,8b" {
		t.Errorf("ShapeNames = %v", got)
	}
}

func TestParseType(t *testing.T) {
	for _, typ := range WeightTypes {
		for _, name := range []string{typ.String(), strings.ToUpper(typ.String())} {
			got, err := ParseType(name)
			if err != nil || got != typ {
				t.Errorf("ParseType(%q) = %v, %v; want %v", name, got, err, typ)
			}
		}
	}
	for _, bad := range []string{"", "q3_k", "int8", "q1"} {
		if _, err := ParseType(bad); !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("ParseType(%q) = %v, want ErrUnsupportedType", bad, err)
		}
	}
}

func TestBadOptions(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]Options{
		"no layers":       {Shape: Shape{Name: "x", Layers: 0, Hidden: 256, Heads: 2, KVHeads: 1, HeadDim: 128, FFN: 512, Vocab: 1024, Context: 16}, Type: gguf.Q1_0},
		"heads vs kv":     {Shape: Shape{Name: "x", Layers: 1, Hidden: 256, Heads: 3, KVHeads: 2, HeadDim: 128, FFN: 512, Vocab: 1024, Context: 16}, Type: gguf.Q1_0},
		"vocab too big":   {Shape: Shape{Name: "x", Layers: 1, Hidden: 256, Heads: 2, KVHeads: 1, HeadDim: 128, FFN: 512, Vocab: 300000, Context: 16}, Type: gguf.Q1_0},
		"vocab too small": {Shape: Shape{Name: "x", Layers: 1, Hidden: 256, Heads: 2, KVHeads: 1, HeadDim: 128, FFN: 512, Vocab: 100, Context: 16}, Type: gguf.Q1_0},
		"block size":      {Shape: Shape{Name: "x", Layers: 1, Hidden: 128, Heads: 1, KVHeads: 1, HeadDim: 128, FFN: 384, Vocab: 1024, Context: 16}, Type: gguf.Q4_K},
		"type":            {Shape: Shapes["tiny"], Type: gguf.Q3_K},
		"logit std":       {Shape: Shapes["tiny"], Type: gguf.Q1_0, LogitStd: -1},
	}
	for name, o := range cases {
		if err := Write(filepath.Join(dir, "m.gguf"), o); err == nil {
			t.Errorf("%s: Write succeeded", name)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed writes left %d files behind", len(entries))
	}
}

// TestModelLayout checks what llama.cpp's qwen3 loader reads: keys, tensor
// names, shapes and types, for every weight type.
func TestModelLayout(t *testing.T) {
	for _, typ := range WeightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			o := small(typ)
			f, _ := write(t, o)
			s := o.Shape
			u := func(key string, want uint64) {
				if got, ok := f.KV.Uint(key); !ok || got != want {
					t.Errorf("%s = %d, %v; want %d", key, got, ok, want)
				}
			}
			if a, _ := f.KV.String("general.architecture"); a != "qwen3" {
				t.Errorf("architecture %q", a)
			}
			u("qwen3.block_count", uint64(s.Layers))
			u("qwen3.embedding_length", uint64(s.Hidden))
			u("qwen3.feed_forward_length", uint64(s.FFN))
			u("qwen3.attention.head_count", uint64(s.Heads))
			u("qwen3.attention.head_count_kv", uint64(s.KVHeads))
			u("qwen3.attention.key_length", 128)
			u("qwen3.attention.value_length", 128)
			u("qwen3.context_length", uint64(s.Context))
			if eps, _ := f.KV.Float("qwen3.attention.layer_norm_rms_epsilon"); float32(eps) != 1e-6 {
				t.Errorf("rms eps %g", eps)
			}
			if theta, _ := f.KV.Float("qwen3.rope.freq_base"); theta != 1e6 {
				t.Errorf("rope theta %g", theta)
			}

			wantTensors := 2 + 11*s.Layers // token_embd, output_norm, 11 per layer (tied)
			if len(f.Tensors) != wantTensors {
				t.Errorf("%d tensors, want %d", len(f.Tensors), wantTensors)
			}
			if _, ok := f.Tensor("output.weight"); ok {
				t.Error("a tied model has output.weight")
			}
			q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
			h, ffn := int64(s.Hidden), int64(s.FFN)
			shapes := map[string][]int64{
				"token_embd.weight":        {h, int64(s.Vocab)},
				"output_norm.weight":       {h},
				"blk.1.attn_q.weight":      {h, q},
				"blk.1.attn_k.weight":      {h, kv},
				"blk.1.attn_v.weight":      {h, kv},
				"blk.1.attn_output.weight": {q, h},
				"blk.1.attn_q_norm.weight": {128},
				"blk.1.attn_k_norm.weight": {128},
				"blk.1.ffn_gate.weight":    {h, ffn},
				"blk.1.ffn_up.weight":      {h, ffn},
				"blk.1.ffn_down.weight":    {ffn, h},
				"blk.1.attn_norm.weight":   {h},
				"blk.1.ffn_norm.weight":    {h},
			}
			for name, shape := range shapes {
				ti, ok := f.Tensor(name)
				if !ok {
					t.Errorf("missing %s", name)
					continue
				}
				wantType := typ
				if len(shape) == 1 {
					wantType = gguf.F32
				}
				if !equal(ti.Shape, shape) || ti.Type != wantType {
					t.Errorf("%s: %v %s, want %v %s", name, ti.Shape, ti.Type, shape, wantType)
				}
			}
			// Values decode, and scales are what plan promises: unit-mean norms.
			norm, _ := f.Tensor("blk.0.attn_norm.weight")
			vals := make([]float32, norm.Elements())
			if err := quant.DequantizeRow(gguf.F32, f.Data(norm), vals); err != nil {
				t.Fatal(err)
			}
			var mean float64
			for _, v := range vals {
				mean += float64(v) / float64(len(vals))
			}
			if mean < 0.95 || mean > 1.05 {
				t.Errorf("attn_norm mean %.3f, want ~1", mean)
			}
		})
	}
}

func TestUntied(t *testing.T) {
	o := small(gguf.Q8_0)
	o.Shape.Tied = false
	f, _ := write(t, o)
	out, ok := f.Tensor("output.weight")
	if !ok || !equal(out.Shape, []int64{int64(o.Shape.Hidden), int64(o.Shape.Vocab)}) || out.Type != gguf.Q8_0 {
		t.Fatalf("output.weight = %+v, %v", out, ok)
	}
}

// TestReproducible: the same options write the same bytes whatever the
// parallelism; another seed writes other weights.
func TestReproducible(t *testing.T) {
	o := small(gguf.Q4_K)
	_, a := write(t, o)
	prev := runtime.GOMAXPROCS(1)
	_, b := write(t, o)
	runtime.GOMAXPROCS(prev)
	if sha256.Sum256(a) != sha256.Sum256(b) {
		t.Error("the same seed wrote different files with GOMAXPROCS 1")
	}
	o.Seed++
	_, c := write(t, o)
	if sha256.Sum256(a) == sha256.Sum256(c) {
		t.Error("another seed wrote the same file")
	}
}

// TestQwenTokenizer: the full vocab is the real Qwen2 vocab with the Qwen3
// added tokens, eos <|im_end|>, and the Qwen3 chat template.
func TestQwenTokenizer(t *testing.T) {
	o := Options{Shape: Shapes["tiny"], Type: gguf.Q1_0, Seed: 1}
	o.Shape.Layers = 1
	f, _ := write(t, o)
	ref, err := gguf.Parse(qwen.VocabGGUF)
	if err != nil {
		t.Fatal(err)
	}
	refTokens, _ := ref.KV.Strings("tokenizer.ggml.tokens")
	refMerges, _ := ref.KV.Strings("tokenizer.ggml.merges")
	tokens, _ := f.KV.Strings("tokenizer.ggml.tokens")
	types, _ := f.KV.Int32s("tokenizer.ggml.token_type")
	merges, _ := f.KV.Strings("tokenizer.ggml.merges")
	if len(tokens) != qwen.VocabSize || len(types) != qwen.VocabSize || len(merges) != len(refMerges) {
		t.Fatalf("%d tokens, %d types, %d merges", len(tokens), len(types), len(merges))
	}
	for i, tok := range tokens {
		want := refTokens[i]
		if i >= 151646 && i <= 151668 {
			want = qwen.AddedTokens[i-151646].Text
		}
		if tok != want {
			t.Fatalf("token %d = %q, want %q", i, tok, want)
		}
	}
	if tokens[qwen.ThinkStart] != "<think>" || types[qwen.ThinkStart] != qwen.TypeUserDefined || types[qwen.IMEnd] != qwen.TypeControl {
		t.Error("Qwen3 added tokens missing")
	}
	for key, want := range map[string]uint64{
		"tokenizer.ggml.bos_token_id":     uint64(qwen.BOS),
		"tokenizer.ggml.eos_token_id":     uint64(qwen.EOS),
		"tokenizer.ggml.padding_token_id": uint64(qwen.PAD),
	} {
		if got, _ := f.KV.Uint(key); got != want {
			t.Errorf("%s = %d, want %d", key, got, want)
		}
	}
	if add, ok := f.KV.Bool("tokenizer.ggml.add_bos_token"); !ok || add {
		t.Error("add_bos_token should be false")
	}
	for key, want := range map[string]string{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2"} {
		if got, _ := f.KV.String(key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	tmpl, _ := f.KV.String("tokenizer.chat_template")
	for _, part := range []string{"<|im_start|>", "enable_thinking", "<think>\\n\\n</think>\\n\\n", "tool_call"} {
		if !strings.Contains(tmpl, part) {
			t.Errorf("chat template lacks %q", part)
		}
	}
}

// TestCutVocab: a cut vocab keeps the byte tokens, only merges whose parts
// and result survive, and every special token, renumbered to the end.
func TestCutVocab(t *testing.T) {
	v, err := qwen3Vocab(1024)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.tokens) != 1024 || len(v.types) != 1024 {
		t.Fatalf("%d tokens", len(v.tokens))
	}
	index := map[string]int{}
	for i, tok := range v.tokens {
		index[tok] = i
	}
	for _, m := range v.merges {
		l, r, _ := strings.Cut(m, " ")
		for _, part := range []string{l, r, l + r} {
			if _, ok := index[part]; !ok {
				t.Fatalf("merge %q uses %q, not in the cut vocab", m, part)
			}
		}
	}
	if len(v.merges) < 1024-26-256-10 {
		t.Errorf("only %d merges kept", len(v.merges))
	}
	if v.tokens[v.bos] != "<|endoftext|>" || v.tokens[v.eos] != "<|im_end|>" || v.tokens[v.pad] != "<|endoftext|>" {
		t.Errorf("bos %q eos %q pad %q", v.tokens[v.bos], v.tokens[v.eos], v.tokens[v.pad])
	}
	if id, ok := index["</think>"]; !ok || id != 1023 || v.types[id] != qwen.TypeUserDefined {
		t.Errorf("</think> at %d (%v)", id, ok)
	}
	if _, err := qwen3Vocab(300); err == nil {
		t.Error("vocab 300 accepted")
	}
}

func TestChatTemplateIsQwen3(t *testing.T) {
	// The template as Qwen3 ships it: 4,116 characters, no trailing newline.
	if len(qwen3ChatTemplate) != 4116 || strings.HasSuffix(qwen3ChatTemplate, "\n") {
		t.Errorf("template is %d characters", len(qwen3ChatTemplate))
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestQwen35Shapes(t *testing.T) {
	s, err := ArchShape("qwen35", "27b")
	if err != nil {
		t.Fatal(err)
	}
	// Bonsai 27B / Bonsai 2.
	got := [10]int{s.Layers, s.Hidden, s.FFN, s.Vocab, s.Heads, s.KVHeads, s.HeadDim, s.Hybrid.RopeDims, s.Hybrid.StateSize, s.Hybrid.ConvKernel}
	if want := [10]int{64, 5120, 17408, 248320, 24, 4, 256, 64, 128, 4}; got != want {
		t.Errorf("27b: %v, want %v", got, want)
	}
	if s.Hybrid.KHeads != 16 || s.Hybrid.VHeads != 48 || s.Hybrid.VHeads*s.Hybrid.StateSize != 6144 || s.Hybrid.Sections != [4]int{11, 11, 10, 0} {
		t.Errorf("27b DeltaNet %+v", s.Hybrid)
	}
	attn := 0
	for i := range s.Layers {
		if s.attention(i) {
			attn++
		}
	}
	if attn != 16 {
		t.Errorf("27b: %d attention layers, want 16 (and 48 DeltaNet)", attn)
	}
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q2_0, gguf.Q4_K} {
		if _, err := (Options{Shape: s, Type: typ}).Size(); err != nil {
			t.Errorf("27b in %s: %v", typ, err)
		}
	}
	if _, err := ArchShape("qwen35", "8b"); !errors.Is(err, ErrUnknownShape) {
		t.Errorf("qwen35 8b: %v, want ErrUnknownShape", err)
	}
	if _, err := ArchShape("phi3", "tiny"); !errors.Is(err, ErrUnknownArch) {
		t.Errorf("phi3: %v, want ErrUnknownArch", err)
	}
}

// TestQwen35Layout checks what llama.cpp's qwen35 loader reads: its keys and,
// per kind of layer, the tensors' names, shapes and types.
func TestQwen35Layout(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.Q4_K, gguf.F32} {
		t.Run(typ.String(), func(t *testing.T) {
			s := Qwen35Shapes["tiny"]
			s.Vocab = 1024
			f, _ := write(t, Options{Shape: s, Type: typ, Seed: 2})
			if a, _ := f.KV.String("general.architecture"); a != "qwen35" {
				t.Errorf("architecture %q", a)
			}
			for key, want := range map[string]uint64{
				"qwen35.block_count": 6, "qwen35.rope.dimension_count": 32, "qwen35.full_attention_interval": 3,
				"qwen35.ssm.conv_kernel": 4, "qwen35.ssm.state_size": 64, "qwen35.ssm.group_count": 2,
				"qwen35.ssm.time_step_rank": 4, "qwen35.ssm.inner_size": 256, "qwen35.attention.key_length": 128,
			} {
				if got, ok := f.KV.Uint(key); !ok || got != want {
					t.Errorf("%s = %d, %v; want %d", key, got, ok, want)
				}
			}
			if sec, _ := f.KV.Int32s("qwen35.rope.dimension_sections"); len(sec) != 4 || sec[0]+sec[1]+sec[2]+sec[3] != 16 {
				t.Errorf("sections %v", sec)
			}
			gate := gguf.BF16
			if typ == gguf.F32 {
				gate = gguf.F32
			}
			h := int64(256)
			want := map[string]struct {
				shape []int64
				typ   gguf.Type
			}{
				"blk.0.attn_qkv.weight":            {[]int64{h, 512}, typ},
				"blk.0.attn_gate.weight":           {[]int64{h, 256}, typ},
				"blk.0.ssm_conv1d.weight":          {[]int64{4, 512}, gguf.F32},
				"blk.0.ssm_dt.bias":                {[]int64{4}, gguf.F32},
				"blk.0.ssm_a":                      {[]int64{4}, gguf.F32},
				"blk.0.ssm_alpha.weight":           {[]int64{h, 4}, gate},
				"blk.0.ssm_beta.weight":            {[]int64{h, 4}, gate},
				"blk.0.ssm_norm.weight":            {[]int64{64}, gguf.F32},
				"blk.0.ssm_out.weight":             {[]int64{256, h}, typ},
				"blk.0.post_attention_norm.weight": {[]int64{h}, gguf.F32},
				"blk.2.attn_q.weight":              {[]int64{h, 512}, typ}, // q|gate of 2 heads of 128
				"blk.2.attn_k.weight":              {[]int64{h, 128}, typ},
				"blk.2.attn_output.weight":         {[]int64{256, h}, typ},
				"blk.2.attn_q_norm.weight":         {[]int64{128}, gguf.F32},
				"blk.5.ffn_down.weight":            {[]int64{512, h}, typ},
			}
			for name, w := range want {
				ti, ok := f.Tensor(name)
				if !ok {
					t.Errorf("missing %s", name)
					continue
				}
				if !equal(ti.Shape, w.shape) || ti.Type != w.typ {
					t.Errorf("%s: %v %s, want %v %s", name, ti.Shape, ti.Type, w.shape, w.typ)
				}
			}
			for _, absent := range []string{"blk.0.attn_q.weight", "blk.2.attn_qkv.weight", "blk.0.ffn_norm.weight"} {
				if _, ok := f.Tensor(absent); ok {
					t.Errorf("%s should not exist", absent)
				}
			}
			a, _ := f.Tensor("blk.3.ssm_a")
			vals := make([]float32, 4)
			if err := quant.DequantizeRow(gguf.F32, f.Data(a), vals); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				if !(v < 0) {
					t.Errorf("ssm_a %v: want −exp(A_log) < 0", vals)
				}
			}
		})
	}
}

// TestPaddedVocab: a vocab beyond Qwen's 151,936 is padded with [PADn]
// tokens, as the Qwen vocab itself is.
func TestPaddedVocab(t *testing.T) {
	v, err := qwen3Vocab(qwenVocab + 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.tokens) != qwenVocab+3 || v.tokens[qwenVocab+2] != fmt.Sprintf("[PAD%d]", qwenVocab+2) || v.types[qwenVocab] != padType {
		t.Fatalf("padded vocab ends %q %v", v.tokens[len(v.tokens)-3:], v.types[len(v.types)-3:])
	}
}
