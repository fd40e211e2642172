package gguf

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The goldens in testdata come from llama.cpp's own GGUF code
// (testdata/llamacpp_check.c says how to regenerate them):
// llamacpp-written.gguf was written by llama.cpp, and the .dump files are
// what llama.cpp's reader sees in a file.
var writeBonsai = flag.String("write-bonsai", "", "write the bonsai-written GGUF here (to dump it with llama.cpp)")

var llamaTypeNames = map[ValueType]string{
	TypeUint8: "u8", TypeInt8: "i8", TypeUint16: "u16", TypeInt16: "i16", TypeUint32: "u32", TypeInt32: "i32",
	TypeFloat32: "f32", TypeBool: "bool", TypeString: "str", TypeArray: "arr", TypeUint64: "u64", TypeInt64: "i64", TypeFloat64: "f64",
}

// llamaDump prints f the way llamacpp_check.c prints what llama.cpp reads.
func llamaDump(f *File) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version %d\nalignment %d\ndata_offset %d\n", f.Version, f.Alignment, f.DataOffset)
	for _, k := range f.KV.Keys() {
		v, _ := f.KV.Get(k)
		fmt.Fprintf(&b, "kv %s", escape(k))
		if v.Type == TypeArray {
			fmt.Fprintf(&b, " array %s %d", llamaTypeNames[v.Elem], v.Len())
			for i := range v.Len() {
				b.WriteString(dumpScalar(v.index(i)))
			}
		} else {
			fmt.Fprintf(&b, " %s%s", llamaTypeNames[v.Type], dumpScalar(v))
		}
		b.WriteByte('\n')
	}
	for _, t := range f.Tensors {
		fmt.Fprintf(&b, "tensor %s type %d offset %d size %d\n", t.Name, t.Type.diskID(), t.Offset, t.Size)
	}
	return b.String()
}

func dumpScalar(v Value) string {
	switch x := v.data.(type) {
	case string:
		return " " + escape(x)
	case float32:
		return fmt.Sprintf(" f32:%08x", math.Float32bits(x))
	case float64:
		return fmt.Sprintf(" f64:%016x", math.Float64bits(x))
	}
	return fmt.Sprintf(" %v", v.data)
}

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c > 0x20 && c < 0x7f && c != '\\' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	return b.String()
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// llamaWritten rebuilds, with our Writer, the file llamacpp_check.c writes.
func llamaWritten(t *testing.T) []byte {
	w := NewWriter()
	w.Set("general.architecture", "qwen3")
	for _, kv := range []struct {
		k string
		v any
	}{
		{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(65000)}, {"i16", int16(-32000)},
		{"u32", uint32(4_000_000_000)}, {"i32", int32(-2_000_000_000)}, {"u64", uint64(math.MaxUint64)},
		{"i64", int64(math.MinInt64)}, {"f32", float32(1e-6)}, {"f64", 3.141592653589793},
		{"true", true}, {"false", false}, {"str", "héllo <|im_end|>\n"}, {"empty.str", ""},
		{"a.i32", []int32{1, 1, 3, 4, -1}}, {"a.f32", []float32{0.5, -2, 1e30}}, {"a.u8", []uint8{0, 1, 255}},
		{"a.i64", []int64{math.MinInt64, 0}}, {"a.f64", []float64{1e300, -0.25}}, {"a.bool", []bool{true, false, true}},
		{"a.str", []string{"Ġ Ġ", "", "<think>"}}, {"a.empty", []float32{}},
	} {
		w.Set(kv.k, kv.v)
	}
	for i, ts := range []struct {
		name  string
		typ   Type
		shape []int64
	}{
		{"token_embd.weight", Q1_0, []int64{256, 8}}, {"output_norm.weight", F32, []int64{256}},
		{"blk.0.attn_q.weight", Q2_0, []int64{128, 4}}, {"blk.0.ffn_up.weight", Q8_0, []int64{64, 6}},
		{"blk.0.ffn_down.weight", Q4_K, []int64{512, 2}}, {"blk.0.f16", F16, []int64{5, 3}},
	} {
		rows := int64(1)
		if len(ts.shape) > 1 {
			rows = ts.shape[1]
		}
		size, _ := tensorBytes(ts.typ, ts.shape[0], rows)
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(j*7 + i)
		}
		if err := w.AddTensor(ts.name, ts.typ, ts.shape, data); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestLlamaCppGolden(t *testing.T) {
	llamaFile := readGolden(t, "llamacpp-written.gguf")
	t.Run("read llama.cpp's file", func(t *testing.T) {
		f, err := Parse(llamaFile)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := llamaDump(f), string(readGolden(t, "llamacpp-written.dump")); got != want {
			t.Errorf("we read:\n%s\nllama.cpp reads:\n%s", got, want)
		}
	})
	t.Run("write what llama.cpp writes", func(t *testing.T) {
		if ours := llamaWritten(t); !bytes.Equal(ours, llamaFile) {
			i := 0
			for i < min(len(ours), len(llamaFile)) && ours[i] == llamaFile[i] {
				i++
			}
			t.Errorf("our %d bytes differ from llama.cpp's %d from offset %d", len(ours), len(llamaFile), i)
		}
	})
	t.Run("llama.cpp reads our file", func(t *testing.T) {
		// Every value type except arrays of arrays, which llama.cpp rejects.
		data := buildTestFile(t, testTensors, func(w *Writer) {
			for _, c := range everyValue {
				if c.elem != TypeArray {
					w.Set(c.key, c.v)
				}
			}
			w.Set("str", "héllo <|im_end|>") // the C dump stops at a NUL
		})
		if *writeBonsai != "" {
			if err := os.WriteFile(*writeBonsai, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		f, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := llamaDump(f), string(readGolden(t, "bonsai-written.dump")); got != want {
			t.Errorf("we read:\n%s\nllama.cpp reads:\n%s", got, want)
		}
	})
}
