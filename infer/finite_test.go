package infer_test

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

// A NaN or infinity in a small float tensor (a norm, a bias, an f16
// matrix of a tiny model) is refused at load, naming the tensor. In a
// q1_0 model the trial pass misses a NaN in the first output norm value:
// the Q8_0 rounding of the activations turns it into a finite number.
func TestLoadRefusesNonFiniteSmallTensors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		typ    gguf.Type
		tensor string
		bits   func([]byte)
	}{
		{"NaN first in a q1_0 model's output norm", gguf.Q1_0, "output_norm.weight",
			func(b []byte) { binary.LittleEndian.PutUint32(b, math.Float32bits(float32(math.NaN()))) }},
		{"-Inf in a layer norm", gguf.Q1_0, "blk.1.ffn_norm.weight",
			func(b []byte) { binary.LittleEndian.PutUint32(b[8:], math.Float32bits(float32(math.Inf(-1)))) }},
		{"f16 NaN in a small matrix", gguf.F16, "blk.0.attn_k.weight",
			func(b []byte) { binary.LittleEndian.PutUint16(b[2:], 0x7e00) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := open(t, tinymodel.Small(tc.typ))
			ti, ok := f.Tensor(tc.tensor)
			if !ok {
				t.Fatalf("no tensor %s", tc.tensor)
			}
			tc.bits(f.Data(ti))
			m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 16, Threads: 2})
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			if !errors.Is(err, infer.ErrNonFinite) || !strings.Contains(err.Error(), tc.tensor) {
				t.Errorf("err = %v, want ErrNonFinite naming %s", err, tc.tensor)
			}
		})
	}
}
