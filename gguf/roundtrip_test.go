package gguf

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// everyValue holds one key per metadata value type, scalars and arrays,
// including empty arrays and arrays of arrays.
var everyValue = []struct {
	key  string
	v    any
	typ  ValueType
	elem ValueType
}{
	{"u8", uint8(200), TypeUint8, 0},
	{"i8", int8(-100), TypeInt8, 0},
	{"u16", uint16(65000), TypeUint16, 0},
	{"i16", int16(-32000), TypeInt16, 0},
	{"u32", uint32(4_000_000_000), TypeUint32, 0},
	{"i32", int32(-2_000_000_000), TypeInt32, 0},
	{"u64", uint64(math.MaxUint64), TypeUint64, 0},
	{"i64", int64(math.MinInt64), TypeInt64, 0},
	{"f32", float32(1e-6), TypeFloat32, 0},
	{"f64", math.Pi, TypeFloat64, 0},
	{"true", true, TypeBool, 0},
	{"false", false, TypeBool, 0},
	{"str", "héllo\x00 <|im_end|>", TypeString, 0},
	{"empty.str", "", TypeString, 0},
	{"a.u8", []uint8{0, 1, 255}, TypeArray, TypeUint8},
	{"a.i8", []int8{-128, 0, 127}, TypeArray, TypeInt8},
	{"a.u16", []uint16{1, 65535}, TypeArray, TypeUint16},
	{"a.i16", []int16{-32768, 32767}, TypeArray, TypeInt16},
	{"a.u32", []uint32{7, math.MaxUint32}, TypeArray, TypeUint32},
	{"a.i32", []int32{1, 1, 3, 4, -1}, TypeArray, TypeInt32},
	{"a.u64", []uint64{math.MaxUint64}, TypeArray, TypeUint64},
	{"a.i64", []int64{math.MinInt64, 0}, TypeArray, TypeInt64},
	{"a.f32", []float32{0.5, -2, float32(math.Inf(1))}, TypeArray, TypeFloat32},
	{"a.f64", []float64{1e300, -0.25}, TypeArray, TypeFloat64},
	{"a.bool", []bool{true, false, true}, TypeArray, TypeBool},
	{"a.str", []string{"Ġ Ġ", "", "<think>"}, TypeArray, TypeString},
	{"a.empty", []float32{}, TypeArray, TypeFloat32},
	{"a.a.i32", [][]int32{{1, 2}, {}, {3}}, TypeArray, TypeArray},
	{"a.a.a.str", [][][]string{{{"x"}, {"y", "z"}}}, TypeArray, TypeArray},
}

type testTensor struct {
	name  string
	typ   Type
	shape []int64
}

var testTensors = []testTensor{
	{"token_embd.weight", Q1_0, []int64{256, 8}},
	{"output_norm.weight", F32, []int64{256}},
	{"blk.0.attn_q.weight", Q2_0, []int64{128, 4}},
	{"blk.0.ffn_up.weight", Q8_0, []int64{64, 3, 2}},
	{"blk.0.ffn_down.weight", Q4_K, []int64{512, 2}},
	{"blk.0.empty", F16, []int64{0, 5}},
	{"blk.0.bf16", BF16, []int64{3, 1, 1, 2}},
}

// patterned returns n bytes that differ between tensors, so a misplaced
// tensor shows up.
func patterned(n int64, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func buildTestFile(t testing.TB, tensors []testTensor, setup func(w *Writer)) []byte {
	t.Helper()
	w := NewWriter()
	w.Set("general.architecture", "qwen3")
	if setup != nil {
		setup(w)
	}
	for i, tt := range tensors {
		rows := int64(1)
		for _, d := range tt.shape[1:] {
			rows *= d
		}
		size, err := tensorBytes(tt.typ, tt.shape[0], rows)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(tt.name, tt.typ, tt.shape, patterned(size, byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestRoundTripEveryValueType(t *testing.T) {
	data := buildTestFile(t, testTensors, func(w *Writer) {
		for _, c := range everyValue {
			w.Set(c.key, c.v)
		}
	})
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != DefaultAlignment {
		t.Errorf("version %d alignment %d, want 3 and %d", f.Version, f.Alignment, DefaultAlignment)
	}
	wantKeys := []string{"general.architecture"}
	for _, c := range everyValue {
		wantKeys = append(wantKeys, c.key)
		v, ok := f.KV.Get(c.key)
		if !ok {
			t.Errorf("%s: missing", c.key)
			continue
		}
		if v.Type != c.typ || (c.typ == TypeArray && v.Elem != c.elem) {
			t.Errorf("%s: type %s/%s, want %s/%s", c.key, v.Type, v.Elem, c.typ, c.elem)
		}
		want, _ := toValue(c.v, 0)
		if !reflect.DeepEqual(v, want) {
			t.Errorf("%s: read %v, want %v", c.key, v, want)
		}
	}
	if got := f.KV.Keys(); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("keys in order %v, want %v", got, wantKeys)
	}
	checkTensors(t, f, testTensors)
}

func checkTensors(t *testing.T, f *File, want []testTensor) {
	t.Helper()
	if len(f.Tensors) != len(want) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(want))
	}
	for i, tt := range want {
		info, ok := f.Tensor(tt.name)
		if !ok {
			t.Fatalf("tensor %q missing", tt.name)
		}
		if info.Type != tt.typ || !reflect.DeepEqual(info.Shape, tt.shape) {
			t.Errorf("%s: %s %v, want %s %v", tt.name, info.Type, info.Shape, tt.typ, tt.shape)
		}
		if info.Offset%f.Alignment != 0 {
			t.Errorf("%s: offset %d not aligned", tt.name, info.Offset)
		}
		size, _ := tensorBytes(tt.typ, tt.shape[0], info.Rows())
		if info.Size != size {
			t.Errorf("%s: size %d, want %d", tt.name, info.Size, size)
		}
		if got := f.Data(info); !bytes.Equal(got, patterned(size, byte(i))) {
			t.Errorf("%s: data differs (%d bytes)", tt.name, len(got))
		}
	}
}

func TestAccessors(t *testing.T) {
	data := buildTestFile(t, nil, func(w *Writer) {
		for _, c := range everyValue {
			w.Set(c.key, c.v)
		}
	})
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	kv := f.KV
	if n, ok := kv.Uint("u8"); !ok || n != 200 {
		t.Errorf("Uint(u8) = %d %v", n, ok)
	}
	if n, ok := kv.Uint("u64"); !ok || n != math.MaxUint64 {
		t.Errorf("Uint(u64) = %d %v", n, ok)
	}
	if _, ok := kv.Uint("i8"); ok {
		t.Error("Uint accepted a negative int8")
	}
	if n, ok := kv.Int("i64"); !ok || n != math.MinInt64 {
		t.Errorf("Int(i64) = %d %v", n, ok)
	}
	if _, ok := kv.Int("u64"); ok {
		t.Error("Int accepted MaxUint64")
	}
	if n, ok := kv.Int("u32"); !ok || n != 4_000_000_000 {
		t.Errorf("Int(u32) = %d %v", n, ok)
	}
	if x, ok := kv.Float("f32"); !ok || x != float64(float32(1e-6)) {
		t.Errorf("Float(f32) = %g %v", x, ok)
	}
	if _, ok := kv.Float("u32"); ok {
		t.Error("Float accepted an integer")
	}
	if b, ok := kv.Bool("true"); !ok || !b {
		t.Errorf("Bool(true) = %v %v", b, ok)
	}
	if s, ok := kv.String("str"); !ok || s != "héllo\x00 <|im_end|>" {
		t.Errorf("String(str) = %q %v", s, ok)
	}
	if s, ok := kv.Strings("a.str"); !ok || len(s) != 3 || s[2] != "<think>" {
		t.Errorf("Strings = %q %v", s, ok)
	}
	if s, ok := kv.Int32s("a.u16"); !ok || !reflect.DeepEqual(s, []int32{1, 65535}) {
		t.Errorf("Int32s(a.u16) = %v %v", s, ok)
	}
	if _, ok := kv.Int32s("a.u32"); ok {
		t.Error("Int32s accepted MaxUint32")
	}
	if s, ok := kv.Float32s("a.f64"); !ok || len(s) != 2 || !math.IsInf(float64(s[0]), 1) || s[1] != -0.25 {
		t.Errorf("Float32s(a.f64) = %v %v", s, ok)
	}
	if _, ok := kv.String("missing"); ok {
		t.Error("String(missing) ok")
	}
	if _, err := kv.RequireUint("missing"); !errors.Is(err, ErrNoKey) {
		t.Errorf("RequireUint(missing) = %v, want ErrNoKey", err)
	}
	if _, err := kv.RequireUint("str"); !errors.Is(err, ErrKeyType) {
		t.Errorf("RequireUint(str) = %v, want ErrKeyType", err)
	}
	if _, err := kv.RequireString("str"); err != nil {
		t.Error(err)
	}
	if _, err := kv.RequireFloat("f64"); err != nil {
		t.Error(err)
	}
}

func TestCustomAlignment(t *testing.T) {
	data := buildTestFile(t, testTensors, func(w *Writer) { w.Set(KeyAlignment, uint32(64)) })
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("alignment %d data offset %d", f.Alignment, f.DataOffset)
	}
	checkTensors(t, f, testTensors)
}

func TestWriterRejects(t *testing.T) {
	w := NewWriter()
	if err := w.AddTensor("a", Q1_0, []int64{100}, make([]byte, 18)); !errors.Is(err, ErrShape) {
		t.Errorf("row of 100 Q1_0: %v", err)
	}
	if err := w.AddTensor("a", Type(4), []int64{32}, nil); !errors.Is(err, ErrUnknownType) {
		t.Errorf("type 4: %v", err)
	}
	if err := w.AddTensor("a", F32, []int64{2}, make([]byte, 7)); !errors.Is(err, ErrShape) {
		t.Errorf("short data: %v", err)
	}
	if err := w.AddTensor("a", F32, []int64{1, 1, 1, 1, 1}, make([]byte, 4)); !errors.Is(err, ErrShape) {
		t.Errorf("5 dims: %v", err)
	}
	if err := w.AddTensor(strings.Repeat("n", 64), F32, []int64{1}, make([]byte, 4)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("64-byte name: %v", err)
	}
	if err := w.AddTensor("", F32, []int64{1}, make([]byte, 4)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("empty name: %v", err)
	}
	if err := w.AddTensor("a", F32, []int64{1}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("a", F32, []int64{1}, make([]byte, 4)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("duplicate: %v", err)
	}
	w = NewWriter()
	w.Set("", 1)
	if _, err := w.WriteTo(&bytes.Buffer{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("empty key: %v", err)
	}
	for _, bad := range []any{struct{}{}, []any{1}, map[string]int{}, nil, [][]struct{}{{}}} {
		w := NewWriter()
		w.Set("k", bad)
		if _, err := w.WriteTo(&bytes.Buffer{}); err == nil {
			t.Errorf("Set(%T) accepted", bad)
		}
	}
	w = NewWriter()
	w.Set(KeyAlignment, uint32(48))
	if _, err := w.WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("alignment 48 accepted")
	}
}

// TestQ2_0Layouts: id 42 holds either the current layout (64 weights in 18
// bytes) or the legacy Prism one (128 in 34 bytes); the reader tells them
// apart by the tensor's byte span, for a tensor in the middle of the data
// and for the last one.
func TestQ2_0Layouts(t *testing.T) {
	tensors := []testTensor{
		{"g64.first", Q2_0, []int64{4096, 3}},
		{"g128.middle", Q2_0G128, []int64{4096, 3}},
		{"f32", F32, []int64{8}},
		{"g128.last", Q2_0G128, []int64{2048, 2}},
	}
	data := buildTestFile(t, tensors, nil)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	checkTensors(t, f, tensors)
	// On disk both are id 42.
	if n := bytes.Count(data, []byte{0x2A, 0, 0, 0}); n < 3 {
		t.Errorf("id 42 appears %d times", n)
	}
	tensors[3] = testTensor{"g64.last", Q2_0, []int64{2048, 2}}
	f, err = Parse(buildTestFile(t, tensors, nil))
	if err != nil {
		t.Fatal(err)
	}
	checkTensors(t, f, tensors)
}

// TestPrismTypes: PQ2_0 (142) and PTQ1_0 (143) round-trip under their own
// ids, beside type-42 tensors of both layouts: a PQ2_0 tensor has the
// legacy g128 size but is never taken for id 42, and the g64/g128 choice
// for id 42 is unchanged around it.
func TestPrismTypes(t *testing.T) {
	tensors := []testTensor{
		{"pq2", PQ2_0, []int64{4096, 3}},
		{"g128", Q2_0G128, []int64{4096, 3}},
		{"ptq1", PTQ1_0, []int64{2048, 2}},
		{"g64", Q2_0, []int64{4096, 2}},
		{"ptq1.last", PTQ1_0, []int64{128, 5}},
	}
	f, err := Parse(buildTestFile(t, tensors, nil))
	if err != nil {
		t.Fatal(err)
	}
	checkTensors(t, f, tensors)
	for _, c := range []struct {
		typ  Type
		id   Type
		name string
	}{{PQ2_0, 142, "pq2_0"}, {PTQ1_0, 143, "ptq1_0"}} {
		if c.typ.diskID() != c.id || c.typ.String() != c.name {
			t.Errorf("%s: disk id %d, name %q", c.typ, c.typ.diskID(), c.typ.String())
		}
	}
}

func TestOpenWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	w := NewWriter()
	w.Set("general.architecture", "qwen3")
	q := patterned(18*2*3, 1)
	if err := w.AddTensor("w", Q1_0, []int64{256, 3}, q); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(entries))
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := f.Tensor("w")
	if !bytes.Equal(f.Data(info), q) || f.Path != path {
		t.Error("mapped data differs")
	}
	if err := f.Prefetch(); err != nil {
		t.Error(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Data(info) != nil {
		t.Error("Data after Close is not nil")
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.WriteFile(filepath.Join(dir, "missing", "m.gguf")); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "absent.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent: %v", err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrNotGGUF) {
		t.Errorf("directory: %v", err)
	}
	empty := filepath.Join(dir, "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); !errors.Is(err, ErrNotGGUF) {
		t.Errorf("empty: %v", err)
	}
	bad := filepath.Join(dir, "bad.gguf")
	os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"), 0o644)
	if _, err := Open(bad); !errors.Is(err, ErrTruncated) {
		t.Errorf("bad: %v", err)
	}
}

func TestTypeTable(t *testing.T) {
	for typ, ti := range typeTable {
		if ti.blockSize <= 0 || ti.blockBytes <= 0 || ti.name == "" {
			t.Errorf("%d: bad row %+v", typ, ti)
		}
		if typ.String() != ti.name || !typ.Known() {
			t.Errorf("%d: String %q Known %v", typ, typ.String(), typ.Known())
		}
	}
	cases := []struct {
		t      Type
		n      int64
		bytes  int64
		bs, bb int
	}{
		{F32, 10, 40, 1, 4}, {F16, 3, 6, 1, 2}, {BF16, 4, 8, 1, 2},
		{Q8_0, 64, 68, 32, 34}, {Q4_0, 32, 18, 32, 18}, {Q4_K, 512, 288, 256, 144},
		{Q5_K, 256, 176, 256, 176}, {Q6_K, 256, 210, 256, 210}, {Q8_K, 256, 292, 256, 292},
		{Q1_0, 4096, 576, 128, 18}, {Q2_0, 4096, 1152, 64, 18}, {Q2_0G128, 4096, 1088, 128, 34},
		{PQ2_0, 128, 34, 128, 34}, {PTQ1_0, 128, 28, 128, 28},
	}
	for _, c := range cases {
		got, err := c.t.RowBytes(c.n)
		if err != nil || got != c.bytes || c.t.BlockSize() != c.bs || c.t.BlockBytes() != c.bb {
			t.Errorf("%s: RowBytes(%d) = %d, %v; block %d/%d", c.t, c.n, got, err, c.t.BlockSize(), c.t.BlockBytes())
		}
	}
	if _, err := Q1_0.RowBytes(64); !errors.Is(err, ErrShape) {
		t.Errorf("Q1_0.RowBytes(64): %v", err)
	}
	if _, err := F32.RowBytes(math.MaxInt64); !errors.Is(err, ErrShape) {
		t.Errorf("F32.RowBytes overflow: %v", err)
	}
	if _, err := Type(5).RowBytes(1); !errors.Is(err, ErrUnknownType) || Type(5).Known() {
		t.Errorf("type 5: %v", err)
	}
	if Type(5).String() != "type(5)" || Q2_0G128.String() != "q2_0_g128" {
		t.Error("names")
	}
	for typ := range typeTable {
		if got, err := ParseType(strings.ToUpper(typ.String())); err != nil || got != typ {
			t.Errorf("ParseType(%q) = %v, %v", typ, got, err)
		}
	}
	if _, err := ParseType("q3_0"); !errors.Is(err, ErrUnknownType) {
		t.Errorf("ParseType(q3_0): %v", err)
	}
}
