package infer

import (
	"bytes"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

func TestClassifyVariant(t *testing.T) {
	b17 := ModelShape{"qwen3", 28, 2048, 16, 8, 128, 6144, 151936, true, false}
	b4 := ModelShape{"qwen3", 36, 2560, 32, 8, 128, 9728, 151936, true, false}
	b8 := ModelShape{"qwen3", 36, 4096, 32, 8, 128, 12288, 151936, false, false}
	q1 := map[gguf.Type]int{gguf.Q1_0: 197}
	b27 := ModelShape{"qwen35", 64, 5120, 24, 4, 256, 17408, 248320, false, false}
	b27tied := func() ModelShape { s := b27; s.Tied = true; return s }()
	b2 := func() ModelShape { s := b27; s.Rotated = true; return s }()
	tests := []struct {
		name   string
		shape  ModelShape
		types  map[gguf.Type]int
		want   string
		bonsai bool
	}{
		{"1.7B Q1_0", b17, q1, "Bonsai-1.7B", true},
		{"4B Q1_0", b4, q1, "Bonsai-4B", true},
		{"8B Q1_0", b8, map[gguf.Type]int{gguf.Q1_0: 254}, "Bonsai-8B", true},
		{"8B ternary g64", b8, map[gguf.Type]int{gguf.Q2_0: 254}, "Ternary-Bonsai-8B", true},
		{"8B ternary g128", b8, map[gguf.Type]int{gguf.Q2_0G128: 254}, "Ternary-Bonsai-8B", true},
		{"4B pq2_0", b4, map[gguf.Type]int{gguf.PQ2_0: 254}, "Ternary-Bonsai-4B", true},
		{"1.7B shape in Q4_0 is plain Qwen3", b17, map[gguf.Type]int{gguf.Q4_0: 197}, "Qwen3 (other)", false},
		{"mixed Q1_0 and Q8_0", b17, map[gguf.Type]int{gguf.Q1_0: 196, gguf.Q8_0: 1}, "Qwen3 (other)", false},
		{"8B shape but tied", func() ModelShape { s := b8; s.Tied = true; return s }(), q1, "Qwen3 (other)", false},
		{"1.7B with fewer layers", func() ModelShape { s := b17; s.Layers = 2; return s }(), q1, "Qwen3 (other)", false},
		{"other arch", ModelShape{Arch: "phi3"}, q1, "phi3 (other)", false},
		{"Gemma 3 1B", ModelShape{"gemma3", 26, 1152, 4, 1, 256, 6912, 262144, true, false}, q1, "Gemma-3-1B", false},
		{"llama of no known shape", ModelShape{Arch: "llama"}, q1, "Llama (other)", false},
		{"Llama 3.2 1B", ModelShape{"llama", 16, 2048, 32, 8, 64, 8192, 128256, true, false}, map[gguf.Type]int{gguf.Q4_K: 100}, "Llama-3.2-1B", false},
		{"Llama 3.1 8B tied still 8B", ModelShape{"llama", 32, 4096, 32, 8, 128, 14336, 128256, true, false}, q1, "Llama-3.1-8B", false},
		{"Llama 2 7B", ModelShape{"llama", 32, 4096, 32, 32, 128, 11008, 32000, false, false}, q1, "Llama-2-7B", false},
		{"Mistral 7B", ModelShape{"llama", 32, 4096, 32, 8, 128, 14336, 32000, false, false}, q1, "Mistral-7B", false},
		{"TinyLlama", ModelShape{"llama", 22, 2048, 32, 4, 64, 5632, 32000, false, false}, q1, "TinyLlama-1.1B", false},
		{"Qwen2.5 1.5B", ModelShape{"qwen2", 28, 1536, 12, 2, 128, 8960, 151936, true, false}, q1, "Qwen2.5-1.5B", false},
		{"Qwen2.5 shape as qwen3 is no Qwen2.5", ModelShape{"qwen3", 28, 1536, 12, 2, 128, 8960, 151936, true, false}, q1, "Qwen3 (other)", false},
		{"Llama with one layer fewer", ModelShape{"llama", 15, 2048, 32, 8, 64, 8192, 128256, true, false}, q1, "Llama (other)", false},
		{"qwen35", ModelShape{Arch: "qwen35"}, q1, "Qwen35 (other)", false},
		{"no weights", b17, nil, "Qwen3 (other)", false},
		{"27B Q1_0", b27, map[gguf.Type]int{gguf.Q1_0: 497}, "Bonsai-27B", true},
		{"27B Q1_0 tied", b27tied, map[gguf.Type]int{gguf.Q1_0: 496}, "Bonsai-27B", true},
		{"27B ternary g64", b27, map[gguf.Type]int{gguf.Q2_0: 497}, "Ternary-Bonsai-27B", true},
		{"27B ternary g128", b27, map[gguf.Type]int{gguf.Q2_0G128: 497}, "Ternary-Bonsai-27B", true},
		{"Bonsai 2 PTQ1_0", b2, map[gguf.Type]int{gguf.PTQ1_0: 497}, "Bonsai-2-27B", true},
		{"Bonsai 2 PQ2_0", b2, map[gguf.Type]int{gguf.PQ2_0: 497}, "Bonsai-2-27B", true},
		{"Bonsai 2 mixed Prism types", b2, map[gguf.Type]int{gguf.PTQ1_0: 496, gguf.PQ2_0: 1}, "Bonsai-2-27B", true},
		{"Bonsai 2 development Q2_0", b2, map[gguf.Type]int{gguf.Q2_0: 497}, "Bonsai-2-27B", true},
		{"27B PQ2_0 without rotation", b27, map[gguf.Type]int{gguf.PQ2_0: 497}, "Ternary-Bonsai-27B", true},
		{"27B PTQ1_0 without rotation", b27, map[gguf.Type]int{gguf.PTQ1_0: 497}, "Qwen35 (other)", false},
		{"rotated Q1_0", b2, map[gguf.Type]int{gguf.Q1_0: 497}, "Qwen35 (other)", false},
		{"rotated Bonsai 2 types in Q4_K", b2, map[gguf.Type]int{gguf.Q4_K: 497}, "Qwen35 (other)", false},
		{"rotated 8B", func() ModelShape { s := b8; s.Rotated = true; return s }(), map[gguf.Type]int{gguf.PQ2_0: 254}, "Qwen3 (other)", false},
		{"27B in Q4_K", b27, map[gguf.Type]int{gguf.Q4_K: 497}, "Qwen35 (other)", false},
		{"27B shape with 48 layers", func() ModelShape { s := b27; s.Layers = 48; return s }(), map[gguf.Type]int{gguf.Q1_0: 497}, "Qwen35 (other)", false},
		{"PTQ1_0 in a 1.x shape", b8, map[gguf.Type]int{gguf.PTQ1_0: 254}, "Qwen3 (other)", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := ClassifyVariant(tc.shape, tc.types)
			if v.Name != tc.want || v.Bonsai != tc.bonsai {
				t.Fatalf("ClassifyVariant = %+v, want %q (bonsai %v)", v, tc.want, tc.bonsai)
			}
			wantTemp, wantTopP, wantThink := float32(0.5), float32(0.85), false
			if tc.shape.Arch == "qwen35" {
				wantTemp, wantTopP, wantThink = 0.7, 0.95, true
			}
			if v.Bonsai && (v.Temperature != wantTemp || v.TopP != wantTopP || v.TopK != 20 || v.Think != wantThink) {
				t.Errorf("Bonsai sampling defaults %+v, want temp %v, top-p %v, top-k 20, thinking %v", v, wantTemp, wantTopP, wantThink)
			}
		})
	}
}

// A file in Bonsai's shape is Bonsai only when it says so (its name, file
// name or PrismML as its maker); random weights in the shape are named by
// the shape.
func TestBonsaiShapeIsNotARelease(t *testing.T) {
	b17 := ModelShape{"qwen3", 28, 2048, 16, 8, 128, 6144, 151936, true, false}
	shaped := ClassifyVariant(b17, map[gguf.Type]int{gguf.Q1_0: 197})
	if v := releaseOrShape(shaped, "qwen3", false); v.Name != "Qwen3 (1.7B shape)" || v.Bonsai || v.Temperature != 0 {
		t.Errorf("an unnamed file in the 1.7B shape: %+v", v)
	}
	if v := releaseOrShape(shaped, "qwen3", true); v.Name != "Bonsai-1.7B" || !v.Bonsai {
		t.Errorf("a file named Bonsai in the 1.7B shape: %+v", v)
	}

	for _, tc := range []struct {
		path string
		kv   map[string]string
		want bool
	}{
		{"/m/x.gguf", map[string]string{"general.name": "bonsai-synth bonsai-1.7b Q1_0 seed 1"}, false},
		{"/m/x.gguf", map[string]string{"general.name": "bonsai-tiny"}, false},
		{"/m/x.gguf", nil, false},
		{"/m/x.gguf", map[string]string{"general.name": "Bonsai 8B"}, true},
		{"/m/x.gguf", map[string]string{"general.name": "Ternary-Bonsai-27B"}, true},
		{"/m/x.gguf", map[string]string{"general.basename": "Bonsai"}, true},
		{"/m/x.gguf", map[string]string{"general.organization": "Prism Ml"}, true},
		{"/m/x.gguf", map[string]string{"general.source.huggingface.repository": "prism-ml/Bonsai-8B"}, true},
		{"/m/Bonsai-8B-Q1_0.gguf", nil, true},
		{"/m/Bonsai-2-27B-PTQ1_0.gguf", nil, true},
		{"/m/bonsai-synth-1.7b.gguf", nil, false},
	} {
		w := gguf.NewWriter()
		w.Set("general.architecture", "qwen3")
		for k, v := range tc.kv {
			w.Set(k, v)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		f.Path = tc.path
		if got := namedBonsai(f); got != tc.want {
			t.Errorf("namedBonsai(%s, %v) = %v, want %v", tc.path, tc.kv, got, tc.want)
		}
	}
}

// A file in a known Llama or Qwen2.5 shape is named as that model only when
// it names itself of the family; bonsai synth's are "-shaped".
func TestFamilyShapeNaming(t *testing.T) {
	v := ClassifyVariant(ModelShape{"llama", 16, 2048, 32, 8, 64, 8192, 128256, true, false}, nil)
	for _, tc := range []struct {
		path string
		name string
		want string
	}{
		{"/m/x.gguf", "bonsai-synth 1b Q4_K seed 1", "Llama-3.2-1B-shaped"},
		{"/m/x.gguf", "Llama 3.2 1B Instruct", "Llama-3.2-1B"},
		{"/m/Llama-3.2-1B-Instruct-Q4_K_M.gguf", "", "Llama-3.2-1B"},
	} {
		w := gguf.NewWriter()
		w.Set("general.architecture", "llama")
		if tc.name != "" {
			w.Set("general.name", tc.name)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		f.Path = tc.path
		if got := familyOrShape(v, namedFamily(f, v.family)); got.Name != tc.want || got.Size != "1B" || got.Bonsai {
			t.Errorf("%s named %q: %+v, want %q", tc.path, tc.name, got, tc.want)
		}
	}
}
