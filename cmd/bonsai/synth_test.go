package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

func TestSynthCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.gguf")
	for _, bad := range [][]string{
		{},                             // no -o
		{"-o", out, "--shape", "70b"},  // unknown shape
		{"-o", out, "--arch", "llama"}, // unknown architecture
		{"-o", out, "--arch", "qwen35", "--shape", "8b"}, // not a qwen35 shape
		{"-o", out, "--arch", "qwen35", "--layers", "2"}, // fewer layers than the attention interval
		{"-o", out, "--type", "q3_k"},                    // unsupported type
		{"-o", out, "--layers", "-1"},                    // negative
		{"-o", out, "--vocab", "100"},                    // vocab below the minimum
		{"-o", out, "extra"},                             // stray argument
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
