package main

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

func TestSynthCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.gguf")
	for _, bad := range [][]string{
		{},                            // no -o
		{"-o", out, "--shape", "70b"}, // unknown shape
		{"-o", out, "--arch", "phi3"}, // unknown architecture
		{"-o", out, "--arch", "qwen35", "--shape", "8b"},  // not a qwen35 shape
		{"-o", out, "--arch", "qwen35", "--layers", "2"},  // fewer layers than the attention interval
		{"-o", out, "--type", "q3_k"},                     // unsupported type
		{"-o", out, "--layers", "-1"},                     // negative
		{"-o", out, "--vocab", "100"},                     // vocab below the minimum
		{"-o", out, "--window", "64"},                     // qwen3 has no sliding window
		{"-o", out, "--arch", "gemma3", "--window", "-1"}, // negative
		{"-o", out, "extra"},                              // stray argument
		{"-o", out, "--type", "q4_k", "--vocab", "1024", "--shape", "tiny", "--bogus"},
	} {
		var stdout, stderr bytes.Buffer
		if err := runSynth(bad, &stdout, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("synth %q: %v, want a usage error", bad, err)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := runSynth([]string{"--type", "q8_0", "--layers", "1", "--vocab", "1024", "--seed", "3", "-o", out}, &stdout, &stderr); err != nil {
		t.Fatalf("synth: %v\n%s", err, stderr.String())
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, _ := f.KV.Uint("qwen3.block_count"); n != 1 {
		t.Errorf("block_count %d, want 1", n)
	}
	if emb, ok := f.Tensor("token_embd.weight"); !ok || emb.Type != gguf.Q8_0 || emb.Shape[1] != 1024 {
		t.Errorf("token_embd = %+v", emb)
	}
}

// --window sets gemma3's sliding window.
func TestSynthGemma3Window(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gemma3.gguf")
	var stdout, stderr bytes.Buffer
	if err := runSynth([]string{"--arch", "gemma3", "--type", "q8_0", "--vocab", "1024", "--window", "64", "-o", out}, &stdout, &stderr); err != nil {
		t.Fatalf("synth: %v\n%s", err, stderr.String())
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w, _ := f.KV.Uint("gemma3.attention.sliding_window"); w != 64 {
		t.Errorf("sliding_window %d, want 64", w)
	}
}

// --arch llama writes a Llama 3-shaped file with its rope_freqs; its
// variant is named by that shape.
func TestSynthLlama(t *testing.T) {
	out := filepath.Join(t.TempDir(), "llama.gguf")
	var stdout, stderr bytes.Buffer
	if err := runSynth([]string{"--arch", "llama", "--type", "q8_0", "--vocab", "1024", "-o", out}, &stdout, &stderr); err != nil {
		t.Fatalf("synth: %v\n%s", err, stderr.String())
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if a, _ := f.KV.String("general.architecture"); a != "llama" {
		t.Errorf("architecture %q", a)
	}
	if _, ok := f.Tensor("rope_freqs.weight"); !ok {
		t.Error("no rope_freqs.weight")
	}
	if n, _ := f.KV.Uint("llama.block_count"); n != 2 {
		t.Errorf("block_count %d, want 2", n)
	}
}

func TestSynthQwen35(t *testing.T) {
	out := filepath.Join(t.TempDir(), "q35.gguf")
	var stdout, stderr bytes.Buffer
	if err := runSynth([]string{"--arch", "qwen35", "--type", "q1_0", "--vocab", "1024", "-o", out}, &stdout, &stderr); err != nil {
		t.Fatalf("synth: %v\n%s", err, stderr.String())
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if a, _ := f.KV.String("general.architecture"); a != "qwen35" {
		t.Errorf("architecture %q, want qwen35", a)
	}
	if _, ok := f.Tensor("blk.0.ssm_conv1d.weight"); !ok {
		t.Error("no DeltaNet tensors in layer 0")
	}
}

// qwen35 in a Prism type is Bonsai 2: rotated by default, untied, with a
// twin on request.
func TestSynthBonsai2(t *testing.T) {
	dir := t.TempDir()
	out, twin := filepath.Join(dir, "b2.gguf"), filepath.Join(dir, "twin.gguf")
	for _, bad := range [][]string{
		{"--arch", "qwen35", "--type", "q1_0", "--twin", twin, "-o", out},      // not rotated
		{"--arch", "qwen35", "--type", "ptq1_0", "--block", "1000", "-o", out}, // not a power of two
		{"--arch", "qwen35", "--type", "ptq1_0", "--block", "512", "-o", out},  // does not divide 256
		{"--arch", "qwen35", "--type", "ptq1_0", "--rotation", "maybe", "-o", out},
	} {
		var stdout, stderr bytes.Buffer
		if err := runSynth(bad, &stdout, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("synth %q: %v, want a usage error", bad, err)
		}
	}
	for _, typ := range []string{"ptq1_0", "pq2_0"} {
		var stdout, stderr bytes.Buffer
		if err := runSynth([]string{"--arch", "qwen35", "--type", typ, "--vocab", "1024", "--twin", twin, "-o", out}, &stdout, &stderr); err != nil {
			t.Fatalf("synth %s: %v\n%s", typ, err, stderr.String())
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := infer.ReadHadamard(f)
		if err != nil || spec == nil || spec.Block != 256 || fmt.Sprint(spec.Widths()) != "[256 512]" {
			t.Errorf("%s: rotation %+v, %v; want blocks of 256 over widths 256 and 512", typ, spec, err)
		}
		if _, ok := f.Tensor("output.weight"); !ok {
			t.Errorf("%s: no separate output", typ)
		}
		f.Close()
		// 4 DeltaNet layers × 6 + 2 attention layers × 7 + output.
		var info bytes.Buffer
		if err := runInfo([]string{out}, &info, &stderr); err != nil {
			t.Fatal(err)
		}
		if want := "blocks of 256, explicit signs, input widths [256 512]: 39 weights rotated (4 regrouped), 1 table(s) rotated back"; !strings.Contains(info.String(), want) {
			t.Errorf("%s: bonsai info says\n%s\nwithout %q", typ, info.String(), want)
		}
		tw, err := gguf.Open(twin)
		if err != nil {
			t.Fatal(err)
		}
		if spec, err := infer.ReadHadamard(tw); spec != nil || err != nil {
			t.Errorf("%s: the twin is rotated: %v, %v", typ, spec, err)
		}
		tw.Close()
	}
	// PQ2_0 in qwen3 is Ternary Bonsai 1.x: no rotation unless asked.
	var stdout, stderr bytes.Buffer
	if err := runSynth([]string{"--type", "pq2_0", "--vocab", "1024", "--layers", "1", "-o", out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if spec, err := infer.ReadHadamard(f); spec != nil || err != nil {
		t.Errorf("qwen3 pq2_0 is rotated: %v, %v", spec, err)
	}
}
