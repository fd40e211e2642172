package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
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
		{"-d", "-5"},
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
		if got := decodeBytes(f, h, infer.KVTypes{}, tc.pos); got != tc.want {
			t.Errorf("%s: decodeBytes = %d, want %d", tc.name, got, tc.want)
		}
	}
	f := &gguf.File{Tensors: []gguf.TensorInfo{embd, blk}}
	if got, want := tgBytes(f, h, infer.KVTypes{}, 0, 3), float64(1064)+2*float64(kvPerPos); got != want {
		t.Errorf("tgBytes over 3 tokens = %v, want %v (positions 0, 1, 2)", got, want)
	}
	if got, want := tgBytes(f, h, infer.KVTypes{}, 10, 3), float64(1064)+12*float64(kvPerPos); got != want {
		t.Errorf("tgBytes over 3 tokens at depth 10 = %v, want %v (positions 10, 11, 12)", got, want)
	}
}

func TestParseDepths(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0", []int{0}, true},
		{"0,512, 4096", []int{0, 512, 4096}, true},
		{"-1", nil, false},
		{"4k", nil, false},
		{"", nil, false},
	} {
		got, err := parseDepths(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("parseDepths(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestBenchAtDepth: -d runs each test after that many tokens in the cache,
// on a network with a KV cache only and on a recurrent one (which starts
// each repetition from its snapshot at the depth), and says so in the test
// name, as llama-bench's "tg128 @ d4096".
func TestBenchAtDepth(t *testing.T) {
	dir := t.TempDir()
	q35 := filepath.Join(dir, "q35.gguf")
	var out, errOut bytes.Buffer
	if err := runSynth([]string{"--arch", "qwen35", "--shape", "tiny", "--type", "q1_0", "-o", q35}, &out, &errOut); err != nil {
		t.Fatalf("synth: %v\n%s", err, errOut.String())
	}
	for _, model := range []string{"", q35} {
		args := []string{"-p", "8", "-n", "4", "-r", "2", "-d", "0,40", "--format", "json", "--backend", "cpu", "--threads", "1"}
		if model != "" {
			args = append(args, "--model", model)
		}
		out.Reset()
		if err := runBench(args, &out, &errOut); err != nil {
			t.Fatalf("bench %v: %v\n%s", args, err, errOut.String())
		}
		var res []benchResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("bench %v: %v\n%s", args, err, out.String())
		}
		var tests []string
		for _, r := range res {
			tests = append(tests, fmt.Sprintf("%s/%d/%d", r.Test, r.Depth, len(r.Samples)))
		}
		if want := []string{"pp8/0/2", "tg4/0/2", "pp8 @ d40/40/2", "tg4 @ d40/40/2"}; !slices.Equal(tests, want) {
			t.Errorf("bench %v: tests %v, want %v", args, tests, want)
		}
	}
}

// TestBenchFirstAndSampled: --first times the process's first and second
// tg runs before the warm-up ("tg4 1st", "tg4 2nd", one sample each, at
// the first depth), and --sampled adds a "tg4 sampled" line per depth
// where the backend chains sampling (not the CPU's, which has no chained
// sampler: no line there).
func TestBenchFirstAndSampled(t *testing.T) {
	args := []string{"-p", "0", "-n", "4", "-r", "2", "-d", "40,0", "--first", "--sampled", "--format", "json", "--backend", "cpu", "--threads", "1"}
	var out, errOut bytes.Buffer
	if err := runBench(args, &out, &errOut); err != nil {
		t.Fatalf("bench %v: %v\n%s", args, err, errOut.String())
	}
	var res []benchResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("bench %v: %v\n%s", args, err, out.String())
	}
	var tests []string
	for _, r := range res {
		tests = append(tests, fmt.Sprintf("%s/%d/%d", r.Test, r.Depth, len(r.Samples)))
	}
	if want := []string{"tg4 1st @ d40/40/1", "tg4 2nd @ d40/40/1", "tg4 @ d40/40/2", "tg4/0/2"}; !slices.Equal(tests, want) {
		t.Errorf("bench %v: tests %v, want %v", args, tests, want)
	}
}
