package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokenNLL(t *testing.T) {
	tests := []struct {
		logits []float32
		target int32
		want   float64
	}{
		{[]float32{0, 0}, 0, math.Ln2},
		{[]float32{0, 0, 0, 0}, 3, math.Log(4)},
		{[]float32{1000, 0}, 0, 0},                         // no overflow
		{[]float32{2, 1}, 1, 1 + math.Log1p(math.Exp(-1))}, // -log(e^1/(e^2+e^1))
	}
	for _, tt := range tests {
		if got := tokenNLL(tt.logits, tt.target); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("tokenNLL(%v, %d) = %v, want %v", tt.logits, tt.target, got, tt.want)
		}
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.bin")
	os.WriteFile(good, []byte{1, 0, 0, 0, 0x2a, 0x51, 0x02, 0}, 0o644)
	ids, err := readTokenFile(good)
	if err != nil || len(ids) != 2 || ids[0] != 1 || ids[1] != 151850 {
		t.Errorf("got %v, %v", ids, err)
	}
	odd := filepath.Join(dir, "odd.bin")
	os.WriteFile(odd, []byte{1, 0, 0}, 0o644)
	if _, err := readTokenFile(odd); err == nil {
		t.Errorf("a file of 3 bytes was accepted")
	}
}

func TestPerplexityCommand(t *testing.T) {
	text := filepath.Join(t.TempDir(), "text.txt")
	os.WriteFile(text, []byte("In the beginning God created the heaven and the earth. And the earth was without form, and void."), 0o644)
	var out, errOut bytes.Buffer
	err := runPerplexity([]string{"--model", "../../infer/defaultmodel/bonsai-tiny.gguf", "--text", text, "--ctx", "8", "--windows", "2"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "over 2 windows of 8 tokens") {
		t.Errorf("output:\n%s", out.String())
	}
	if err := runPerplexity([]string{"--model", "x.gguf"}, &out, &errOut); err == nil {
		t.Errorf("no input file: no error")
	}
}

func TestFormatPPL(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		want string
	}{{12.34567, "12.3457"}, {999999, "999999.0000"}, {3.2e30, "3.2000e+30"}, {math.Inf(1), "+Inf"}} {
		if got := formatPPL(tc.p); got != tc.want {
			t.Errorf("formatPPL(%g) = %q, want %q", tc.p, got, tc.want)
		}
	}
}
