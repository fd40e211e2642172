package synth

import (
	"math"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// The llama and qwen2 files carry what llama.cpp's loader reads for those
// architectures: their keys, qwen2's biases, no q/k norms, llama's
// rope_freqs and Llama 3's tokenizer.
func TestDenseArchLayouts(t *testing.T) {
	for _, tc := range []struct {
		arch            string
		bias, ropeFreqs bool
		pre             string
		addBOS          bool
		template        string
	}{
		{"llama", false, true, "llama-bpe", true, "<|start_header_id|>"},
		{"qwen2", true, false, "qwen2", false, "<|im_start|>"},
		{"gemma3", false, false, "qwen2", false, "<|im_start|>"},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			s := archShapes[tc.arch]["tiny"]
			s.Vocab = 1024
			f, _ := write(t, Options{Shape: s, Type: gguf.Q8_0, Seed: 1})
			if a, _ := f.KV.String("general.architecture"); a != tc.arch {
				t.Errorf("architecture %q", a)
			}
			layers, kvHeads := uint64(2), uint64(2)
			if tc.arch == "gemma3" {
				layers, kvHeads = 6, 1
			}
			for key, want := range map[string]uint64{"block_count": layers, "embedding_length": 256, "attention.head_count": 4,
				"attention.head_count_kv": kvHeads, "attention.key_length": 64} {
				if got, ok := f.KV.Uint(tc.arch + "." + key); !ok || got != want {
					t.Errorf("%s.%s = %d, %v; want %d", tc.arch, key, got, ok, want)
				}
			}
			for name, want := range map[string]bool{
				"blk.0.attn_q.bias": tc.bias, "blk.1.attn_k.bias": tc.bias, "blk.1.attn_v.bias": tc.bias,
				"blk.0.attn_q_norm.weight": tc.arch == "gemma3", "blk.0.attn_k_norm.weight": tc.arch == "gemma3",
				"blk.1.post_attention_norm.weight": tc.arch == "gemma3", "blk.1.post_ffw_norm.weight": tc.arch == "gemma3",
				"rope_freqs.weight":     tc.ropeFreqs,
				"blk.1.ffn_down.weight": true, "output.weight": false,
			} {
				if _, ok := f.Tensor(name); ok != want {
					t.Errorf("%s present: %v, want %v", name, ok, want)
				}
			}
			if b, ok := f.Tensor("blk.0.attn_k.bias"); tc.bias && (!ok || b.Type != gguf.F32 || !equal(b.Shape, []int64{128})) {
				t.Errorf("k bias %v %v", b.Type, b.Shape)
			}
			if w, ok := f.KV.Uint(tc.arch + ".attention.sliding_window"); ok != (tc.arch == "gemma3") || ok && w != 512 {
				t.Errorf("sliding window %d, %v", w, ok)
			}
			if pre, _ := f.KV.String("tokenizer.ggml.pre"); pre != tc.pre {
				t.Errorf("pre-tokenizer %q, want %q", pre, tc.pre)
			}
			if bos, _ := f.KV.Bool("tokenizer.ggml.add_bos_token"); bos != tc.addBOS {
				t.Errorf("add_bos_token %v", bos)
			}
			if tmpl, _ := f.KV.String("tokenizer.chat_template"); !strings.Contains(tmpl, tc.template) {
				t.Errorf("chat template lacks %q", tc.template)
			}
		})
	}
}

// rope_freqs are llama.cpp's converter's for Llama 3.2 (factor 32, low 1,
// high 4, 8192 original positions) over head dimension 64, theta 5e5: 1
// for the fast pairs, 32 for the slow, smoothly between.
func TestLlama3RopeFactors(t *testing.T) {
	ff := llama32Scaling.factors(64, 5e5)
	if len(ff) != 32 || ff[0] != 1 || ff[31] != 32 {
		t.Fatalf("factors %v", ff)
	}
	for i := 1; i < len(ff); i++ {
		if ff[i] < ff[i-1] {
			t.Fatalf("factor %d (%v) below factor %d (%v)", i, ff[i], i-1, ff[i-1])
		}
	}
	// A pair inside the ramp: wavelength between 8192/4 and 8192/1.
	mid := 0
	for i, v := range ff {
		if v > 1 && v < 32 {
			mid = i
			break
		}
	}
	freq := float64(float32(1 / math.Pow(5e5, float64(2*mid)/64)))
	smooth := (8192/(2*math.Pi/freq) - 1) / 3
	if want := 1 / ((1-smooth)/32 + smooth); mid == 0 || math.Abs(float64(ff[mid])-want) > 1e-5*want {
		t.Errorf("factor %d = %v, want %v", mid, ff[mid], want)
	}
}

// A cut Llama 3 vocab keeps its first tokens, the merges inside them and
// the text and chat markers renumbered to the end; the full one is Llama
// 3's.
func TestLlamaVocab(t *testing.T) {
	v, err := llamaVocab(1024)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.tokens) != 1024 || len(v.types) != 1024 || len(v.merges) == 0 {
		t.Fatalf("%d tokens, %d merges", len(v.tokens), len(v.merges))
	}
	if v.tokens[v.bos] != "<|begin_of_text|>" || v.tokens[v.eos] != "<|eot_id|>" || v.tokens[1023] != "<|python_tag|>" {
		t.Errorf("bos %q eos %q last %q", v.tokens[v.bos], v.tokens[v.eos], v.tokens[1023])
	}
	full, err := llamaVocab(llama3Vocab)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.tokens) != llama3Vocab || full.bos != llamaBOS || full.eos != llamaEOT || full.tokens[128008] != "<|eom_id|>" {
		t.Errorf("full vocab: %d tokens, bos %d, eos %d, 128008 %q", len(full.tokens), full.bos, full.eos, full.tokens[128008])
	}
	if _, err := llamaVocab(300); err == nil {
		t.Error("vocab 300 accepted")
	}
}
