package gpu_test

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
	"github.com/bonsai-chat/bonsai/infer/quant"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// q4KM is llama.cpp's Q4_K_M recipe in outline: Q6_K for the output, the
// value projections and the FFN down projections, Q4_K for the other
// matrices (llama.cpp gives Q6_K to half the layers' attn_v and ffn_down;
// here every layer's, so both types meet in every layer).
func q4KM(name string) gguf.Type {
	for _, s := range []string{"output.weight", "attn_v.", "ffn_down."} {
		if strings.Contains(name, s) {
			return gguf.Q6_K
		}
	}
	return gguf.Q4_K
}

// loadMixed loads synth's tiny model of arch (vocab cut to 1024), made in
// F32 and requantized by mix (vectors stay F32), on backend, and reports
// the bytes of the file's tensors.
func loadMixed(t *testing.T, arch, backend string, mix func(string) gguf.Type) (*infer.Model, int64) {
	t.Helper()
	s, err := synth.ArchShape(arch, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = 1024
	dir := t.TempDir()
	src := filepath.Join(dir, "f32.gguf")
	if err := synth.Write(src, synth.Options{Shape: s, Type: gguf.F32, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	in, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	w := gguf.NewWriter()
	for _, k := range in.KV.Keys() {
		v, _ := in.KV.Get(k)
		w.Set(k, v)
	}
	for i := range in.Tensors {
		ti := &in.Tensors[i]
		data := in.Data(ti)
		if len(ti.Shape) < 2 || ti.Type != gguf.F32 {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Shape, data); err != nil {
				t.Fatal(err)
			}
			continue
		}
		typ := mix(ti.Name)
		k := int(ti.Shape[0])
		rb, err := typ.RowBytes(int64(k))
		if err != nil {
			t.Fatal(err)
		}
		rows := len(data) / 4 / k
		out, row := make([]byte, rows*int(rb)), make([]float32, k)
		for r := 0; r < rows; r++ {
			for j := range row {
				row[j] = math.Float32frombits(binary.LittleEndian.Uint32(data[(r*k+j)*4:]))
			}
			if err := quant.QuantizeRow(typ, row, out[r*int(rb):(r+1)*int(rb)]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.AddTensor(ti.Name, typ, ti.Shape, out); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "mixed.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var size int64
	for _, ti := range f.Tensors {
		size += ti.Size
	}
	m, err := infer.Load(f, infer.Options{Backend: backend, Batch: 64, Context: 256, GPU: softwareOK})
	if err != nil {
		if backend == "gpu" && errors.Is(err, gpu.ErrNoAdapter) && os.Getenv("CI") != "true" {
			t.Skipf("no GPU adapter: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, size
}

// The block types the GPU reads as stored decode as on the CPU, within
// TestGreedyMatchesCPU's 3e-2 (TestDenseArchsGreedyMatchCPU has Q8_0 and
// Q4_K on the three dense architectures): Q4_0 and Q5_K alone, and a
// Q4_K_M-like mix of Q4_K and Q6_K, whose weights on the device are the
// file's bytes (a word of padding aside).
func TestBlockTypesGreedyMatchCPU(t *testing.T) {
	for _, c := range []struct {
		arch, name string
		mix        func(string) gguf.Type
	}{
		{"llama", "q4_0", func(string) gguf.Type { return gguf.Q4_0 }},
		{"qwen2", "q5_K", func(string) gguf.Type { return gguf.Q5_K }},
		{"llama", "q4_K_M", q4KM},
		{"qwen2", "q4_K_M", q4KM},
	} {
		t.Run(c.arch+"/"+c.name, func(t *testing.T) {
			cpu, _ := loadMixed(t, c.arch, "cpu", c.mix)
			gpuM, size := loadMixed(t, c.arch, "gpu", c.mix)
			// the device holds the file's bytes, not f32 (~7× as many)
			if got := gpuM.Backend().Memory().Weights; got > size {
				t.Errorf("%d bytes of weights on the device for %d in the file", got, size)
			}
			decodeBoth(t, cpu, gpuM, []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45}, 16, 3e-2)
		})
	}
}
