package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/quant"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// fakeModelBin writes a model.bin the way train.py does, for a one-layer
// model with random 1-bit weights.
func fakeModelBin(t *testing.T) []byte {
	t.Helper()
	c := config{Vocab: 151936, Embd: 128, Layers: 1, Heads: 2, HeadsKV: 1, HeadDim: 64, FF: 256, Eps: 1e-6, RopeTheta: 10000, CtxTrain: 64}
	rng := rand.New(rand.NewPCG(1, 2))
	var body bytes.Buffer
	var tensors []tensor
	add := func(name, typ string, shape []int64, data []byte) {
		tensors = append(tensors, tensor{Name: name, Type: typ, Shape: shape, Offset: int64(body.Len()), Size: int64(len(data))})
		body.Write(data)
	}
	q := func(name string, cols, rows int) {
		row := make([]float32, cols)
		rb, _ := gguf.Q1_0.RowBytes(int64(cols))
		data := make([]byte, int(rb)*rows)
		for r := range rows {
			for i := range row {
				row[i] = float32(rng.NormFloat64())
			}
			if err := quant.QuantizeRow(gguf.Q1_0, row, data[r*int(rb):(r+1)*int(rb)]); err != nil {
				t.Fatal(err)
			}
		}
		add(name, "Q1_0", []int64{int64(cols), int64(rows)}, data)
	}
	f := func(name string, n int) {
		data := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(data[4*i:], 0x3f800000) // 1.0
		}
		add(name, "F32", []int64{int64(n)}, data)
	}
	q("token_embd.weight", c.Embd, c.Vocab)
	f("blk.0.attn_norm.weight", c.Embd)
	q("blk.0.attn_q.weight", c.Embd, c.Heads*c.HeadDim)
	q("blk.0.attn_k.weight", c.Embd, c.HeadsKV*c.HeadDim)
	q("blk.0.attn_v.weight", c.Embd, c.HeadsKV*c.HeadDim)
	q("blk.0.attn_output.weight", c.Heads*c.HeadDim, c.Embd)
	f("blk.0.attn_q_norm.weight", c.HeadDim)
	f("blk.0.attn_k_norm.weight", c.HeadDim)
	f("blk.0.ffn_norm.weight", c.Embd)
	q("blk.0.ffn_gate.weight", c.Embd, c.FF)
	q("blk.0.ffn_up.weight", c.Embd, c.FF)
	q("blk.0.ffn_down.weight", c.FF, c.Embd)
	f("output_norm.weight", c.Embd)
	header, err := json.Marshal(modelBin{Config: c, Tensors: tensors})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(header)))
	out.Write(header)
	out.Write(body.Bytes())
	return out.Bytes()
}

func TestExport(t *testing.T) {
	raw := fakeModelBin(t)
	m, err := parseModelBin(raw)
	if err != nil {
		t.Fatal(err)
	}
	w, err := buildGGUF(m)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := f.KV.String("general.name"); name != Name {
		t.Errorf("general.name = %q", name)
	}
	if n, _ := f.KV.Uint("qwen3.attention.key_length"); n != 64 {
		t.Errorf("key_length = %d", n)
	}
	if _, err := tokenizer.FromGGUF(f.KV); err != nil {
		t.Errorf("tokenizer: %v", err)
	}
	for _, src := range m.Tensors {
		ti, ok := f.Tensor(src.Name)
		if !ok {
			t.Errorf("%s missing", src.Name)
			continue
		}
		if !bytes.Equal(f.Data(ti), src.data) {
			t.Errorf("%s: data differs from model.bin", src.Name)
		}
	}
}

func TestRequantizeRejectsForeignBlocks(t *testing.T) {
	raw := fakeModelBin(t)
	m, err := parseModelBin(raw)
	if err != nil {
		t.Fatal(err)
	}
	// A negative scale decodes to the opposite signs and a positive scale:
	// not what the quantizer writes.
	q := m.Tensors[2] // blk.0.attn_q.weight
	q.data = append([]byte(nil), q.data...)
	q.data[1] |= 0x80
	if _, err := requantize(q); err == nil {
		t.Errorf("a block with a negative scale was accepted")
	}
}

func TestParseModelBinErrors(t *testing.T) {
	raw := fakeModelBin(t)
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header longer than file", raw[:100]},
		{"tensor data cut", raw[:len(raw)-1]},
		{"not json", append([]byte{3, 0, 0, 0, 0, 0, 0, 0}, "{{{"...)},
	} {
		if _, err := parseModelBin(tt.data); !errors.Is(err, errFormat) {
			t.Errorf("%s: err = %v, want errFormat", tt.name, err)
		}
	}
}

func FuzzParseModelBin(f *testing.F) {
	f.Add([]byte{})
	f.Add(append([]byte{40, 0, 0, 0, 0, 0, 0, 0}, `{"tensors":[{"offset":0,"size":4}]}`...))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseModelBin(data)
		if err != nil {
			return
		}
		for _, tn := range m.Tensors {
			if int64(len(tn.data)) != tn.Size {
				t.Fatalf("tensor %q: %d bytes for size %d", tn.Name, len(tn.data), tn.Size)
			}
		}
	})
}
