package parity

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

func TestScratch(t *testing.T) {
	path := os.Getenv("SCRATCH_MODEL")
	var toks []int32
	var args []string
	for _, s := range strings.Split(os.Getenv("SCRATCH_TOKENS"), ",") {
		v, _ := strconv.Atoi(s)
		toks = append(toks, int32(v))
		args = append(args, s)
	}
	out, err := runOracle("--model", path, "--tokens", strings.Join(args, ","), "--n", "1", "--top", "8")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(string(out))
	f, _ := gguf.Open(path)
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(toks, 0); err != nil {
		t.Fatal(err)
	}
	t.Log(topString(m.Logits(), 8))
	_ = math.Abs
}
