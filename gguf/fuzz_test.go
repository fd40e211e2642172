package gguf

import (
	"cmp"
	"errors"
	"os"
	"slices"
	"testing"
)

// FuzzParse: any input either parses into a self-consistent File or fails
// with one of the sentinel errors; never a panic, hang or huge allocation.
func FuzzParse(f *testing.F) {
	f.Add(buildTestFile(f, testTensors, func(w *Writer) {
		for _, c := range everyValue {
			w.Set(c.key, c.v)
		}
	}))
	f.Add(buildTestFile(f, []testTensor{{"g128", Q2_0G128, []int64{256, 2}}, {"g64", Q2_0, []int64{64}}}, nil))
	f.Add(buildTestFile(f, testTensors[:2], func(w *Writer) { w.Set(KeyAlignment, uint32(64)) }))
	f.Add(nested(3))
	if b, err := os.ReadFile("testdata/llamacpp-written.gguf"); err == nil {
		f.Add(b)
	}
	f.Add(header(2, 0).tensor("a", F32, 0, 16).tensor("b", F32, 64, 16).data(128).b)
	sentinels := []error{ErrNotGGUF, ErrVersion, ErrTruncated, ErrCorrupt, ErrUnknownType, ErrShape, ErrRange, ErrOverlap, ErrMisaligned}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			for _, s := range sentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		type span struct{ start, end int64 }
		var spans []span
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			if !ti.Type.Known() || len(ti.Shape) == 0 || len(ti.Shape) > MaxDims {
				t.Fatalf("tensor %q: type %s shape %v", ti.Name, ti.Type, ti.Shape)
			}
			want, err := tensorBytes(ti.Type, ti.Shape[0], ti.Rows())
			if err != nil || want != ti.Size {
				t.Fatalf("tensor %q: size %d, want %d (%v)", ti.Name, ti.Size, want, err)
			}
			if got := file.Data(ti); int64(len(got)) != ti.Size {
				t.Fatalf("tensor %q: Data has %d bytes, want %d", ti.Name, len(got), ti.Size)
			}
			if ti.Offset%file.Alignment != 0 {
				t.Fatalf("tensor %q misaligned", ti.Name)
			}
			if got, ok := file.Tensor(ti.Name); !ok || got != ti {
				t.Fatalf("tensor %q: lookup", ti.Name)
			}
			if ti.Size > 0 {
				spans = append(spans, span{ti.Offset, ti.Offset + ti.Size})
			}
		}
		slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
		for i := 1; i < len(spans); i++ {
			if spans[i].start < spans[i-1].end {
				t.Fatalf("overlap %v %v", spans[i-1], spans[i])
			}
		}
		for _, k := range file.KV.Keys() {
			v, _ := file.KV.Get(k)
			_ = v.String()
		}
	})
}
