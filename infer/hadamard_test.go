package infer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// kvPair is one metadata key of a test file, in order.
type kvPair struct {
	key string
	v   any
}

// rotatedKeys is a consistent prism.hadamard.* set for rotatedTensors: a
// small hybrid model with 6 V heads of 4 over 2 K heads (ssm_out reads 24),
// blocks of 8.
func rotatedKeys() []kvPair {
	signs := func(n int, flip int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = 1
			if (i*7+flip)%3 == 0 {
				s[i] = -1
			}
		}
		return s
	}
	values := append(append(signs(16, 0), signs(24, 1)...), signs(32, 2)...)
	return []kvPair{
		{"general.architecture", "qwen35"},
		{"qwen35.ssm.state_size", uint32(4)},
		{"qwen35.ssm.group_count", uint32(2)},
		{"qwen35.ssm.time_step_rank", uint32(6)},
		{keyHadamardVersion, uint32(1)},
		{keyHadamardBlock, uint32(8)},
		{keyHadamardTransform, hadamardTransform},
		{keyHadamardAxis, hadamardAxis},
		{keyHadamardSignMode, signModeExplicit},
		{keyHadamardSignWidths, []int32{16, 24, 32}},
		{keyHadamardSignValues, values},
		{keyHadamardWeights, []string{"blk.0.attn_qkv.weight", "blk.0.attn_gate.weight", "blk.0.ssm_out.weight", "blk.0.ffn_down.weight", "output.weight"}},
		{keyHadamardInverse, []string{"token_embd.weight"}},
		{keyHadamardGrouped, true},
	}
}

var rotatedTensors = []struct {
	name  string
	shape []int64
}{
	{"token_embd.weight", []int64{16, 10}},
	{"output.weight", []int64{16, 10}},
	{"output_norm.weight", []int64{16}},
	{"blk.0.attn_qkv.weight", []int64{16, 8}},
	{"blk.0.attn_gate.weight", []int64{16, 24}},
	{"blk.0.ssm_alpha.weight", []int64{16, 6}},
	{"blk.0.ssm_out.weight", []int64{24, 16}},
	{"blk.0.ffn_down.weight", []int64{32, 16}},
}

// testFile writes keys and tensors (F32 zeros) into a GGUF in memory, with
// edit applied to the keys first.
func testFile(t testing.TB, keys []kvPair, skipTensor string) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, p := range keys {
		w.Set(p.key, p.v)
	}
	for _, ts := range rotatedTensors {
		if ts.name == skipTensor {
			continue
		}
		n := int64(4)
		for _, d := range ts.shape {
			n *= d
		}
		if err := w.AddTensor(ts.name, gguf.F32, ts.shape, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// with returns keys with key set to v (appended if absent), or removed when
// v is nil.
func with(keys []kvPair, key string, v any) []kvPair {
	out := make([]kvPair, 0, len(keys)+1)
	found := false
	for _, p := range keys {
		if p.key == key {
			found = true
			if v == nil {
				continue
			}
			p.v = v
		}
		out = append(out, p)
	}
	if !found && v != nil {
		out = append(out, kvPair{key, v})
	}
	return out
}

func TestReadHadamard(t *testing.T) {
	f := testFile(t, rotatedKeys(), "")
	h, err := ReadHadamard(f)
	if err != nil {
		t.Fatal(err)
	}
	if h.Block != 8 || fmt.Sprint(h.Widths()) != "[16 24 32]" {
		t.Fatalf("block %d, widths %v", h.Block, h.Widths())
	}
	want := map[string]rotatedInput{
		"blk.0.attn_qkv.weight":  {width: 16},
		"blk.0.attn_gate.weight": {width: 16},
		"blk.0.ssm_out.weight":   {width: 24, regroup: HeadOrder{HeadDim: 4, KHeads: 2}},
		"blk.0.ffn_down.weight":  {width: 32},
		"output.weight":          {width: 16},
	}
	if fmt.Sprint(h.inputs) != fmt.Sprint(want) {
		t.Fatalf("inputs %v, want %v", h.inputs, want)
	}
	if len(h.inverse) != 1 || h.inverse["token_embd.weight"] != 16 {
		t.Fatalf("inverse %v", h.inverse)
	}
	if s := h.signs[24]; len(s) != 24 || s[0] != 1 || s[2] != -1 {
		t.Fatalf("signs of 24: %v", s)
	}

	plain := testFile(t, rotatedKeys()[:4], "")
	if h, err := ReadHadamard(plain); h != nil || err != nil {
		t.Fatalf("a file without prism.hadamard keys: %v, %v", h, err)
	}

	// Without gdn_v_grouped ssm_out takes the plain rotation; with sign
	// mode identity there are no signs.
	h, err = ReadHadamard(testFile(t, with(rotatedKeys(), keyHadamardGrouped, false), ""))
	if err != nil || h.inputs["blk.0.ssm_out.weight"] != (rotatedInput{width: 24}) {
		t.Fatalf("ungrouped: %v, %v", h.inputs, err)
	}
	identity := with(with(with(rotatedKeys(), keyHadamardSignMode, signModeIdentity), keyHadamardSignWidths, nil), keyHadamardSignValues, nil)
	h, err = ReadHadamard(testFile(t, identity, ""))
	if err != nil || h.signs != nil {
		t.Fatalf("identity signs: %v, %v", h, err)
	}
	// Signs stored as floats read the same.
	floats := make([]float32, 72)
	for i := range floats {
		floats[i] = -1
	}
	if h, err = ReadHadamard(testFile(t, with(rotatedKeys(), keyHadamardSignValues, floats), "")); err != nil || h.signs[32][31] != -1 {
		t.Fatalf("float signs: %v", err)
	}
}

func TestReadHadamardRefusesInconsistentFiles(t *testing.T) {
	k := rotatedKeys()
	values := k[10].v.([]int32)
	withValue := func(i int, v int32) []int32 {
		s := append([]int32(nil), values...)
		s[i] = v
		return s
	}
	cases := []struct {
		name    string
		keys    []kvPair
		skip    string // a tensor the file lacks
		wantKey string
	}{
		{"version 2", with(k, keyHadamardVersion, uint32(2)), "", keyHadamardVersion},
		{"version a string", with(k, keyHadamardVersion, "1"), "", keyHadamardVersion},
		{"no version", with(k, keyHadamardVersion, nil), "", keyHadamardVersion},
		{"block not a power of two", with(k, keyHadamardBlock, uint32(12)), "", keyHadamardBlock},
		{"block zero", with(k, keyHadamardBlock, uint32(0)), "", keyHadamardBlock},
		{"block not dividing a width", with(k, keyHadamardBlock, uint32(16)), "", keyHadamardSignWidths},
		{"unknown transform", with(k, keyHadamardTransform, "sequency-walsh-hadamard"), "", keyHadamardTransform},
		{"unknown axis", with(k, keyHadamardAxis, "output-first-dimension"), "", keyHadamardAxis},
		{"unknown sign mode", with(k, keyHadamardSignMode, "random"), "", keyHadamardSignMode},
		{"explicit without widths", with(k, keyHadamardSignWidths, nil), "", keyHadamardSignWidths},
		{"explicit without values", with(k, keyHadamardSignValues, nil), "", keyHadamardSignValues},
		{"identity with signs", with(k, keyHadamardSignMode, signModeIdentity), "", keyHadamardSignWidths},
		{"too few values", with(k, keyHadamardSignValues, values[:71]), "", keyHadamardSignValues},
		{"too many values", with(k, keyHadamardSignValues, append(append([]int32(nil), values...), 1)), "", keyHadamardSignValues},
		{"a sign of 0", with(k, keyHadamardSignValues, withValue(40, 0)), "", keyHadamardSignValues},
		{"a sign of 2", with(k, keyHadamardSignValues, withValue(3, 2)), "", keyHadamardSignValues},
		{"a sign of 0.5", with(k, keyHadamardSignValues, []float32{0.5}), "", keyHadamardSignValues},
		{"signs as strings", with(k, keyHadamardSignValues, []string{"+"}), "", keyHadamardSignValues},
		{"a duplicate width", with(k, keyHadamardSignWidths, []int32{16, 16, 40}), "", keyHadamardSignWidths},
		{"a negative width", with(k, keyHadamardSignWidths, []int32{-16, 56, 32}), "", keyHadamardSignWidths},
		{"no widths", with(with(k, keyHadamardSignWidths, []int32{}), keyHadamardSignValues, []int32{}), "", keyHadamardSignWidths},
		{"a width without its signs", with(with(k, keyHadamardSignWidths, []int32{16, 24}), keyHadamardSignValues, values[:40]), "", keyHadamardWeights},
		{"a listed tensor missing", k, "blk.0.ffn_down.weight", keyHadamardWeights},
		{"a listed vector", with(k, keyHadamardWeights, []string{"output_norm.weight"}), "", keyHadamardWeights},
		{"a listed name twice", with(k, keyHadamardWeights, []string{"output.weight", "output.weight"}), "", keyHadamardWeights},
		{"no weight names", with(k, keyHadamardWeights, nil), "", keyHadamardWeights},
		{"weight names not strings", with(k, keyHadamardWeights, []int32{1}), "", keyHadamardWeights},
		{"an inverse tensor missing", with(k, keyHadamardInverse, []string{"tok_embd.weight"}), "", keyHadamardInverse},
		{"a name in both lists", with(k, keyHadamardInverse, []string{"output.weight"}), "", keyHadamardInverse},
		{"a rotated table tied to the output", with(k, keyHadamardWeights, []string{"blk.0.ffn_down.weight"}), "output.weight", keyHadamardInverse},
		{"grouped not a bool", with(k, keyHadamardGrouped, uint8(1)), "", keyHadamardGrouped},
		{"grouped without heads", with(k, "qwen35.ssm.group_count", nil), "", keyHadamardGrouped},
		{"grouped, V heads not a multiple of K heads", with(k, "qwen35.ssm.group_count", uint32(4)), "", keyHadamardGrouped},
		{"grouped, ssm_out width not the V heads", with(k, "qwen35.ssm.time_step_rank", uint32(3)), "", keyHadamardGrouped},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := ReadHadamard(testFile(t, c.keys, c.skip))
			if !errors.Is(err, ErrBadRotation) {
				t.Fatalf("got %v, %v; want ErrBadRotation", h, err)
			}
			if !strings.Contains(err.Error(), c.wantKey+":") {
				t.Fatalf("%v: does not name %s", err, c.wantKey)
			}
		})
	}
}

// fakeBackend records the ops a Rotator issues; only what Rotator calls is
// implemented (the embedded nil Backend panics on anything else).
type fakeBackend struct {
	Backend
	weights map[string]*fakeWeight
	ops     []string
}

type fakeWeight struct {
	name  string
	typ   gguf.Type
	shape []int64
	data  []byte
}

func (w *fakeWeight) Name() string    { return w.name }
func (w *fakeWeight) Type() gguf.Type { return w.typ }
func (w *fakeWeight) Shape() []int64  { return w.shape }
func (t *fakeTensor) Name() string    { return t.name }
func (t *fakeTensor) Rows() int       { return t.rows }
func (t *fakeTensor) Cols() int       { return t.cols }
func (b *fakeBackend) Embed(dst Tensor, w Weight) {
	b.ops = append(b.ops, fmt.Sprintf("embed %s→%s", w.Name(), dst.Name()))
}

type fakeTensor struct {
	name       string
	rows, cols int
}

func (b *fakeBackend) LoadWeight(d WeightData) (Weight, error) {
	w := &fakeWeight{d.Name, d.Type, d.Shape, d.Data}
	b.weights[d.Name] = w
	return w, nil
}

func (b *fakeBackend) NewTensor(name string, rows, cols int) (Tensor, error) {
	return &fakeTensor{name, rows, cols}, nil
}

func (b *fakeBackend) Hadamard(dst, x Tensor, r Rotation) {
	signs := "none"
	if r.Signs != nil {
		signs = r.Signs.Name()
	}
	b.ops = append(b.ops, fmt.Sprintf("hadamard %s→%s block %d signs %s after %v regroup %v", x.Name(), dst.Name(), r.Block, signs, r.SignsAfter, r.Regroup))
}

func TestRotator(t *testing.T) {
	f := testFile(t, rotatedKeys(), "")
	b := &fakeBackend{weights: map[string]*fakeWeight{}}
	r, err := NewRotator(f, b, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{16, 24, 32} {
		w := b.weights[SignsName(n)]
		if w == nil || w.typ != gguf.F32 || fmt.Sprint(w.shape) != fmt.Sprint([]int64{int64(n)}) || len(w.data) != 4*n {
			t.Fatalf("signs of width %d bound as %+v", n, w)
		}
	}
	if rot, ok := r.rots.Input("blk.0.ssm_out.weight"); !ok || rot.Block != 8 || rot.Signs.Name() != SignsName(24) || rot.SignsAfter || rot.Regroup != (HeadOrder{HeadDim: 4, KHeads: 2}) {
		t.Errorf("ssm_out's rotation: %+v, %v", rot, ok)
	}
	if rot, ok := r.rots.Inverse("token_embd.weight"); !ok || rot.Signs.Name() != SignsName(16) || !rot.SignsAfter || rot.Regroup != (HeadOrder{}) {
		t.Errorf("token_embd's rotation: %+v, %v", rot, ok)
	}
	if _, ok := r.rots.Input("blk.0.ssm_alpha.weight"); ok {
		t.Error("ssm_alpha, unlisted, has a rotation")
	}
	weight := func(name string) Weight { return &fakeWeight{name: name} }
	x := &fakeTensor{"x", 4, 16}
	h := &fakeTensor{"h", 4, 16}
	o := &fakeTensor{"o", 4, 24}
	last := &fakeTensor{"last", 1, 16}
	var got []string
	step := func(w string, src *fakeTensor) {
		b.ops = nil
		out := r.Input(weight(w), src)
		got = append(got, fmt.Sprintf("%s(%s): %s %v", w, src.name, out.Name(), b.ops))
	}
	r.Embed(x, weight("token_embd.weight"))
	got = append(got, fmt.Sprint(b.ops))
	step("blk.0.attn_qkv.weight", h)
	step("blk.0.attn_gate.weight", h) // same source: rotated once
	step("blk.0.ssm_alpha.weight", h) // unlisted: the primal h
	step("blk.0.ssm_out.weight", o)   // regrouped
	step("blk.0.attn_qkv.weight", h)  // another source came between: again
	step("blk.0.ssm_alpha.weight", h) // unlisted after listed: still the primal h
	step("blk.0.ffn_up.weight", o)    // unlisted, another source: h may change now
	step("blk.0.attn_gate.weight", h) // so h is rotated again, not taken from before
	step("output.weight", last)       // one row: the one-row scratch
	want := []string{
		"[embed token_embd.weight→x hadamard x→x block 8 signs prism.hadamard.signs.16 after true regroup {0 0}]",
		"blk.0.attn_qkv.weight(h): hadamard.16.4 [hadamard h→hadamard.16.4 block 8 signs prism.hadamard.signs.16 after false regroup {0 0}]",
		"blk.0.attn_gate.weight(h): hadamard.16.4 []",
		"blk.0.ssm_alpha.weight(h): h []",
		"blk.0.ssm_out.weight(o): hadamard.24.4 [hadamard o→hadamard.24.4 block 8 signs prism.hadamard.signs.24 after false regroup {4 2}]",
		"blk.0.attn_qkv.weight(h): hadamard.16.4 [hadamard h→hadamard.16.4 block 8 signs prism.hadamard.signs.16 after false regroup {0 0}]",
		"blk.0.ssm_alpha.weight(h): h []",
		"blk.0.ffn_up.weight(o): o []",
		"blk.0.attn_gate.weight(h): hadamard.16.4 [hadamard h→hadamard.16.4 block 8 signs prism.hadamard.signs.16 after false regroup {0 0}]",
		"output.weight(last): hadamard.16.1 [hadamard last→hadamard.16.1 block 8 signs prism.hadamard.signs.16 after false regroup {0 0}]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ops:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A file without rotation: the plain ops.
	b = &fakeBackend{weights: map[string]*fakeWeight{}}
	r, err = NewRotator(testFile(t, rotatedKeys()[:4], ""), b, 4)
	if err != nil {
		t.Fatal(err)
	}
	r.Embed(x, weight("token_embd.weight"))
	if out := r.Input(weight("output.weight"), last); out != last || len(b.weights) != 0 || fmt.Sprint(b.ops) != "[embed token_embd.weight→x]" {
		t.Fatalf("unrotated: %v, weights %v, ops %v", out.Name(), b.weights, b.ops)
	}
}

// FuzzReadHadamard: any prism.hadamard.* metadata either reads into a spec
// whose every rotation fits its tensors, or is refused with ErrBadRotation;
// never a panic.
func FuzzReadHadamard(f *testing.F) {
	f.Add(uint32(1), uint32(8), hadamardTransform, hadamardAxis, signModeExplicit, []byte{16, 24, 32}, []byte{0xa5, 0x3c, 0xff, 0, 0x0f, 0xf0, 0x55, 0xaa, 0x12}, "blk.0.attn_qkv.weight,blk.0.ssm_out.weight,output.weight", "token_embd.weight", true)
	f.Add(uint32(1), uint32(8), hadamardTransform, hadamardAxis, signModeIdentity, []byte{}, []byte{}, "blk.0.ffn_down.weight", "", false)
	f.Add(uint32(2), uint32(3), "x", "y", "z", []byte{7}, []byte{1}, "nope", "output.weight", true)
	f.Fuzz(func(t *testing.T, version, block uint32, transform, axis, mode string, widths, signBits []byte, weights, inverse string, grouped bool) {
		keys := rotatedKeys()[:4]
		ws := make([]int32, len(widths))
		total := 0
		for i, w := range widths {
			ws[i] = int32(w)
			total += int(w)
		}
		// The sign bits, cycled to the widths' sum, flipped where a 2 is
		// wanted: length and value errors both get explored.
		values := make([]int32, 0, total)
		for i := 0; i < total && len(signBits) > 0; i++ {
			b := signBits[i/8%len(signBits)] >> (i % 8) & 1
			values = append(values, 1-2*int32(b))
		}
		if len(signBits) > 0 && signBits[0] == 0x42 && len(values) > 0 {
			values[len(values)-1] = 2
		}
		split := func(s string) []string {
			if s == "" {
				return []string{}
			}
			return strings.Split(s, ",")
		}
		keys = append(keys,
			kvPair{keyHadamardVersion, version}, kvPair{keyHadamardBlock, block},
			kvPair{keyHadamardTransform, transform}, kvPair{keyHadamardAxis, axis}, kvPair{keyHadamardSignMode, mode},
			kvPair{keyHadamardSignWidths, ws}, kvPair{keyHadamardSignValues, values},
			kvPair{keyHadamardWeights, split(weights)}, kvPair{keyHadamardInverse, split(inverse)},
			kvPair{keyHadamardGrouped, grouped})
		file := testFile(t, keys, "")
		h, err := ReadHadamard(file)
		if err != nil {
			if !errors.Is(err, ErrBadRotation) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		check := func(name string, n int) {
			ti, ok := file.Tensor(name)
			if !ok || int(ti.Shape[0]) != n || n%h.Block != 0 {
				t.Fatalf("%s: width %d, block %d, tensor %v", name, n, h.Block, ti)
			}
			if h.signs != nil {
				s := h.signs[n]
				if len(s) != n {
					t.Fatalf("%s: %d signs for width %d", name, len(s), n)
				}
				for _, v := range s {
					if v != 1 && v != -1 {
						t.Fatalf("%s: sign %g", name, v)
					}
				}
			}
		}
		for name, in := range h.inputs {
			check(name, in.width)
			if g := in.regroup; g.HeadDim > 0 && in.width%(g.HeadDim*g.KHeads) != 0 {
				t.Fatalf("%s: regroup %v of width %d", name, g, in.width)
			}
		}
		for name, n := range h.inverse {
			check(name, n)
		}
	})
}
