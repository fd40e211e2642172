package synth

import (
	"fmt"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestMixQ4_K_M checks the Q4_K_M plan against llama-quantize's rules
// (llama_tensor_get_type_impl and tensor_type_fallback): the layers that
// get more bits are, for n layers, i < n/8, i ≥ 7n/8 and (i − n/8) % 3 == 2,
// listed here by hand.
func TestMixQ4_K_M(t *testing.T) {
	for _, tc := range []struct {
		arch, shape string
		more        []int // layers whose attn_v and ffn_down get more bits
		// types of a layer's tensors: base (q, k, gate, up), more-bits
		// attn_v, other attn_v, attn_output, more-bits ffn_down, other
		// ffn_down; and the (tied) embedding's
		base, vMore, v, out, downMore, down, embd gguf.Type
	}{
		{"llama", "1b", []int{0, 1, 4, 7, 10, 13, 14, 15},
			gguf.Q4_K, gguf.Q6_K, gguf.Q4_K, gguf.Q4_K, gguf.Q6_K, gguf.Q4_K, gguf.Q6_K},
		// 1152-wide rows fit no 256-block: Q4_K falls back to Q5_0, Q6_K
		// to Q8_0; attn_output (1024 wide) and ffn_down (6912) stay K.
		{"gemma3", "1b", []int{0, 1, 2, 5, 8, 11, 14, 17, 20, 22, 23, 24, 25},
			gguf.Q5_0, gguf.Q8_0, gguf.Q5_0, gguf.Q4_K, gguf.Q6_K, gguf.Q4_K, gguf.Q8_0},
	} {
		s, err := ArchShape(tc.arch, tc.shape)
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Shape: s, Type: gguf.Q4_K, Mix: MixQ4_K_M}
		if err := o.validate(); err != nil {
			t.Fatalf("%s %s: %v", tc.arch, tc.shape, err)
		}
		more := map[int]bool{}
		for _, i := range tc.more {
			more[i] = true
		}
		want := map[string]gguf.Type{"token_embd.weight": tc.embd}
		for i := range s.Layers {
			p := fmt.Sprintf("blk.%d.", i)
			want[p+"attn_q.weight"], want[p+"attn_k.weight"] = tc.base, tc.base
			want[p+"ffn_gate.weight"], want[p+"ffn_up.weight"] = tc.base, tc.base
			want[p+"attn_output.weight"] = tc.out
			want[p+"attn_v.weight"], want[p+"ffn_down.weight"] = tc.v, tc.down
			if more[i] {
				want[p+"attn_v.weight"], want[p+"ffn_down.weight"] = tc.vMore, tc.downMore
			}
		}
		seen := 0
		for _, ts := range o.plan(1) {
			if len(ts.shape) < 2 {
				if ts.typ != gguf.F32 {
					t.Errorf("%s %s: %s is %s, want F32", tc.arch, tc.shape, ts.name, ts.typ)
				}
				continue
			}
			w, ok := want[ts.name]
			if !ok {
				t.Errorf("%s %s: unexpected tensor %s", tc.arch, tc.shape, ts.name)
				continue
			}
			seen++
			if ts.typ != w {
				t.Errorf("%s %s: %s is %s, want %s", tc.arch, tc.shape, ts.name, ts.typ, w)
			}
		}
		if seen != len(want) {
			t.Errorf("%s %s: %d weights, want %d", tc.arch, tc.shape, seen, len(want))
		}
	}
}

func TestParseMix(t *testing.T) {
	if m, base, ok := ParseMix("Q4_K_M"); !ok || m != MixQ4_K_M || base != gguf.Q4_K {
		t.Errorf("ParseMix(Q4_K_M) = %v, %v, %v", m, base, ok)
	}
	if _, _, ok := ParseMix("q4_k"); ok {
		t.Error("q4_k is a plain type, not a mix")
	}
}
