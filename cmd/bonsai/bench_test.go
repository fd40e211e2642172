package main

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

func TestMeanStdDev(t *testing.T) {
	tests := []struct {
		xs        []float64
		mean, std float64
	}{
		{[]float64{5}, 5, 0},
		{[]float64{1, 2, 3, 4}, 2.5, math.Sqrt(5.0 / 3)}, // sample deviation, as llama-bench
		{[]float64{10, 10, 10}, 10, 0},
	}
	for _, tt := range tests {
		m, s := meanStdDev(tt.xs)
		if math.Abs(m-tt.mean) > 1e-12 || math.Abs(s-tt.std) > 1e-12 {
			t.Errorf("meanStdDev(%v) = %v, %v; want %v, %v", tt.xs, m, s, tt.mean, tt.std)
		}
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-p", "-1"},
		{"-r", "0"},
		{"-p", "0", "-n", "0"},
		{"--format", "xml"},
		{"--cpu-features", "sse9"},
		{"extra"},
	} {
		var out, errOut bytes.Buffer
		if err := runBench(args, &out, &errOut); !errors.Is(err, errUsage) {
			t.Errorf("bench %v: err = %v, want a usage error", args, err)
		}
	}
}

// TestDecodeBytes: a decoded token reads every weight once, one row of an
// untied token embedding (all of it when it doubles as the output head),
// and the f16 K and V of every cached position.
func TestDecodeBytes(t *testing.T) {
	h := infer.Hyperparams{Arch: "qwen3", Layers: 2, KVHeads: 2, HeadDim: 4}
	kvPerPos := int64(2 * 2 * 2 * 4 * 2) // K and V × layers × heads × dim × f16
	embd := gguf.TensorInfo{Name: "token_embd.weight", Shape: []int64{8, 100}, Size: 1000}
	blk := gguf.TensorInfo{Name: "blk.0.attn_q.weight", Shape: []int64{8, 8}, Size: 64}
	out := gguf.TensorInfo{Name: "output.weight", Shape: []int64{8, 100}, Size: 1000}
	for _, tc := range []struct {
		name    string
		tensors []gguf.TensorInfo
		pos     int
		want    int64
	}{
		{"tied, first token", []gguf.TensorInfo{embd, blk}, 0, 1000 + 64 + kvPerPos},
		{"untied", []gguf.TensorInfo{embd, blk, out}, 0, 10 + 64 + 1000 + kvPerPos},
		{"untied, 10 cached", []gguf.TensorInfo{embd, blk, out}, 10, 10 + 64 + 1000 + 11*kvPerPos},
	} {
		f := &gguf.File{Tensors: tc.tensors}
		if got := decodeBytes(f, h, tc.pos); got != tc.want {
			t.Errorf("%s: decodeBytes = %d, want %d", tc.name, got, tc.want)
		}
	}
	f := &gguf.File{Tensors: []gguf.TensorInfo{embd, blk}}
	if got, want := tgBytes(f, h, 3), float64(1064)+2*float64(kvPerPos); got != want {
		t.Errorf("tgBytes over 3 tokens = %v, want %v (positions 0, 1, 2)", got, want)
	}
}
