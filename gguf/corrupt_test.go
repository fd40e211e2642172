package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
)

// raw assembles GGUF bytes field by field, so tests can write what the
// Writer refuses to.
type raw struct{ b []byte }

func (r *raw) u32(x uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, x); return r }
func (r *raw) u64(x uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, x); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.b = append(r.b, s...); return r }
func (r *raw) bytes(b ...byte) *raw {
	r.b = append(r.b, b...)
	return r
}

// header starts a v3 file with the given counts.
func header(tensors, kvs uint64) *raw {
	r := &raw{}
	r.b = append(r.b, Magic...)
	return r.u32(3).u64(tensors).u64(kvs)
}

// tensor appends a tensor info.
func (r *raw) tensor(name string, typ Type, off uint64, shape ...uint64) *raw {
	r.str(name).u32(uint32(len(shape)))
	for _, d := range shape {
		r.u64(d)
	}
	return r.u32(uint32(typ)).u64(off)
}

// data pads to 32 and appends n zero bytes of tensor data.
func (r *raw) data(n int) *raw {
	for len(r.b)%32 != 0 {
		r.b = append(r.b, 0)
	}
	r.b = append(r.b, make([]byte, n)...)
	return r
}

func TestCorruptFiles(t *testing.T) {
	cases := []struct {
		name string
		file []byte
		want error
		says string // the message must contain this (the key, tensor, reason)
	}{
		{"empty", nil, ErrNotGGUF, "0-byte"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), ErrNotGGUF, "GGML"},
		{"version 1", (&raw{b: []byte(Magic)}).u32(1).b, ErrVersion, "version 1"},
		{"version 4", (&raw{b: []byte(Magic)}).u32(4).b, ErrVersion, "version 4"},
		{"big-endian", (&raw{b: []byte(Magic)}).u32(0x03000000).b, ErrVersion, "big-endian"},
		{"no version", []byte(Magic), ErrTruncated, "version"},
		{"no counts", (&raw{b: []byte(Magic)}).u32(3).u64(0).b, ErrTruncated, "metadata count"},
		{"huge tensor count", header(1<<62, 0).b, ErrTruncated, "tensor count"},
		{"huge kv count", header(0, math.MaxUint64).b, ErrTruncated, "metadata count"},
		{"missing kv", header(0, 1).bytes(make([]byte, 12)...).b, ErrTruncated, ""},
		{"empty key", header(0, 1).bytes(make([]byte, 13)...).b, ErrCorrupt, "empty key"},
		{"huge key length", header(0, 1).u64(1 << 62).u32(0).bytes(0).b, ErrTruncated, "key of metadata entry 0"},
		{"key cut", header(0, 1).u64(20).bytes([]byte("general.arch")...).b, ErrTruncated, "key of metadata entry 0"},
		{"unknown value type", header(0, 1).str("k").u32(13).bytes(0, 0, 0, 0).b, ErrCorrupt, `"k"`},
		{"bool not 0 or 1", header(0, 1).str("flag").u32(uint32(TypeBool)).bytes(2).b, ErrCorrupt, `"flag"`},
		{"huge string length", header(0, 1).str("name").u32(uint32(TypeString)).u64(math.MaxUint64).b, ErrTruncated, `"name"`},
		{"value cut", header(0, 1).str("n").u32(uint32(TypeUint64)).bytes(1, 2, 3).b, ErrTruncated, `"n"`},
		{"huge array count", header(0, 1).str("tokenizer.ggml.scores").u32(uint32(TypeArray)).u32(uint32(TypeFloat32)).u64(1 << 61).b, ErrTruncated, "tokenizer.ggml.scores"},
		{"huge string array count", header(0, 1).str("tokens").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1 << 40).str("a").b, ErrTruncated, "tokens"},
		{"array string cut", header(0, 1).str("tokens").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(2).str("a").u64(100).bytes(1, 2, 3, 4, 5, 6, 7, 8).b, ErrTruncated, "string array element 1"},
		{"unknown array element type", header(0, 1).str("a").u32(uint32(TypeArray)).u32(99).u64(0).b, ErrCorrupt, `"a"`},
		{"bool array element", header(0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeBool)).u64(2).bytes(1, 7).b, ErrCorrupt, "element 1"},
		{"arrays nested too deep", nested(20), ErrCorrupt, "nested deeper"},
		{"duplicate key", header(0, 2).str("k").u32(uint32(TypeUint8)).bytes(1).str("k").u32(uint32(TypeUint8)).bytes(2).b, ErrCorrupt, `"k" appears twice`},
		{"alignment not a power of two", header(0, 1).str(KeyAlignment).u32(uint32(TypeUint32)).u32(48).b, ErrCorrupt, KeyAlignment},
		{"alignment zero", header(0, 1).str(KeyAlignment).u32(uint32(TypeUint32)).u32(0).b, ErrCorrupt, KeyAlignment},
		{"alignment a string", header(0, 1).str(KeyAlignment).u32(uint32(TypeString)).str("32").b, ErrCorrupt, KeyAlignment},
		{"tensor info cut", header(1, 0).str("w").u32(2).u64(32).b, ErrTruncated, `dimension 1 of tensor "w"`},
		{"tensor offset cut", header(1, 0).str("w").u32(1).u64(32).u32(0).bytes(0, 0).b, ErrTruncated, `offset of tensor "w"`},
		{"zero dimensions", header(1, 0).tensor("w", F32, 0).data(0).b, ErrShape, `"w" has 0 dimensions`},
		{"five dimensions", header(1, 0).tensor("w", F32, 0, 1, 1, 1, 1, 1).data(4).b, ErrShape, `"w" has 5 dimensions`},
		{"dims overflow", header(1, 0).tensor("w", F32, 0, 1<<32, 1<<32).data(0).b, ErrShape, `"w": dimension 1`},
		{"dim above int64", header(1, 0).tensor("w", F32, 0, 1<<63).data(0).b, ErrShape, `"w": dimension 0`},
		{"bytes overflow", header(1, 0).tensor("w", F32, 0, 1<<31, 1<<31).data(0).b, ErrShape, `"w"`},
		{"unknown tensor type", header(1, 0).tensor("w", Type(4), 0, 32).data(18).b, ErrUnknownType, `"w": type id 4`},
		{"tensor type past table", header(1, 0).tensor("w", Type(1000), 0, 32).data(18).b, ErrUnknownType, "type id 1000"},
		{"internal g128 id on disk", header(1, 0).tensor("w", Q2_0G128, 0, 128).data(34).b, ErrUnknownType, `"w"`},
		{"row not divisible by block", header(1, 0).tensor("blk.0.attn_q.weight", Q1_0, 0, 100, 2).data(36).b, ErrShape, `"blk.0.attn_q.weight": row length 100`},
		{"q2_0 row not divisible", header(1, 0).tensor("w", Q2_0, 0, 96).data(64).b, ErrShape, `"w": row length 96`},
		{"duplicate tensor", header(2, 0).tensor("w", F32, 0, 8).tensor("w", F32, 32, 8).data(64).b, ErrCorrupt, `"w" appears twice`},
		{"misaligned offset", header(2, 0).tensor("a", F32, 0, 4).tensor("b", F32, 16, 4).data(64).b, ErrMisaligned, `"b": offset 16`},
		{"offset out of file", header(1, 0).tensor("w", F32, 1<<20, 4).data(64).b, ErrRange, `"w": offset 1048576`},
		{"offset above int64", header(1, 0).tensor("w", F32, 1<<63, 4).data(64).b, ErrRange, `"w"`},
		{"data past end", header(1, 0).tensor("w", F32, 0, 64).data(100).b, ErrTruncated, `"w": 256 bytes`},
		{"data past end is a range error", header(1, 0).tensor("w", F32, 0, 64).data(100).b, ErrRange, `"w"`},
		{"no data section", header(1, 0).tensor("w", F32, 0, 1).b, ErrTruncated, "data section"},
		{"overlapping tensors", header(2, 0).tensor("a", F32, 0, 16).tensor("b", F32, 32, 16).data(128).b, ErrOverlap, `"a" (64 bytes at offset 0) overlaps tensor "b"`},
		{"overlap, listed backwards", header(2, 0).tensor("b", F32, 32, 16).tensor("a", F32, 0, 16).data(128).b, ErrOverlap, `"a"`},
		{"same offset", header(2, 0).tensor("a", F32, 0, 8).tensor("b", F32, 0, 8).data(64).b, ErrOverlap, ""},
		{"q2_0 fits neither layout", header(1, 0).tensor("w", Q2_0, 0, 4096).data(1000).b, ErrTruncated, `"w"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse(c.file)
			if err == nil {
				t.Fatalf("parsed: %d tensors, %d keys", len(f.Tensors), f.KV.Len())
			}
			if !errors.Is(err, c.want) {
				t.Errorf("error %q does not wrap %q", err, c.want)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not say %q", err, c.says)
			}
		})
	}
}

// nested is a file with one key holding arrays nested depth deep.
func nested(depth int) []byte {
	r := header(0, 1).str("deep").u32(uint32(TypeArray))
	for range depth {
		r.u32(uint32(TypeArray)).u64(1)
	}
	return r.u32(uint32(TypeUint8)).u64(0).b
}

// TestTruncatedEverywhere cuts a valid file at every byte before the end of
// its last tensor's data: each cut must be reported as truncation (or, in
// the first bytes, as not GGUF), never a panic or a success.
func TestTruncatedEverywhere(t *testing.T) {
	data := buildTestFile(t, testTensors, func(w *Writer) {
		for _, c := range everyValue {
			w.Set(c.key, c.v)
		}
	})
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for i := range f.Tensors {
		end = max(end, f.DataOffset+f.Tensors[i].Offset+f.Tensors[i].Size)
	}
	for cut := range end {
		_, err := Parse(data[:cut])
		if !errors.Is(err, ErrTruncated) && !(cut < 8 && errors.Is(err, ErrNotGGUF)) {
			t.Fatalf("cut at %d of %d: %v", cut, end, err)
		}
	}
	// Cutting only the padding after the last tensor leaves a valid file.
	if _, err := Parse(data[:end]); err != nil {
		t.Errorf("cut at the end of the data: %v", err)
	}
}

// TestHugeCountsDoNotAllocate: counts are checked against the bytes left
// before anything is allocated.
func TestHugeCountsDoNotAllocate(t *testing.T) {
	files := [][]byte{
		header(0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeUint8)).u64(1 << 40).b,
		header(0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(1 << 40).b,
		header(1<<40, 0).b,
		header(0, 1).u64(1 << 40).b,
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, b := range files {
		if _, err := Parse(b); err == nil {
			t.Fatal("parsed")
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("parsing bad counts allocated %d bytes", grew)
	}
}

func TestVersion2(t *testing.T) {
	data := buildTestFile(t, testTensors, nil)
	binary.LittleEndian.PutUint32(data[4:], 2)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 {
		t.Errorf("version %d", f.Version)
	}
	checkTensors(t, f, testTensors)
	if !bytes.Equal(data[:4], []byte(Magic)) {
		t.Error("magic")
	}
}
