package gguf

import (
	"fmt"
	"math"
	"strings"
)

// Type is a tensor element type, numbered as ggml numbers them.
type Type uint32

// ggml type ids. Ids 4, 5 and 31–33, 36–38 were removed from ggml and are
// unknown here.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	NVFP4   Type = 40
	Q1_0    Type = 41
	Q2_0    Type = 42
	// PQ2_0 and PTQ1_0 exist only in PrismML's llama.cpp fork.
	PQ2_0  Type = 142
	PTQ1_0 Type = 143

	// Q2_0G128 is the legacy Prism Q2_0 layout (128 weights in 34 bytes)
	// that old files store under id 42. It never appears on disk under this
	// id: the reader reports it when a type-42 tensor's byte span only fits
	// the g128 size, and the writer stores it as 42.
	Q2_0G128 Type = 0x1002A
)

// typeInfo is one row of the type table: adding a type touches only this
// table.
type typeInfo struct {
	name       string
	blockSize  int // elements per block
	blockBytes int // bytes per block
	onDisk     Type
	// scales are the byte offsets of a quantized block's f16 scales (d,
	// and dmin or s where the type has one), as ggml lays them out: a NaN
	// or infinite scale makes the whole block garbage (FirstNonFinite).
	scales []int
}

var typeTable = map[Type]typeInfo{
	F32:      {"f32", 1, 4, F32, nil},
	F16:      {"f16", 1, 2, F16, nil},
	Q4_0:     {"q4_0", 32, 18, Q4_0, []int{0}},
	Q4_1:     {"q4_1", 32, 20, Q4_1, []int{0, 2}},
	Q5_0:     {"q5_0", 32, 22, Q5_0, []int{0}},
	Q5_1:     {"q5_1", 32, 24, Q5_1, []int{0, 2}},
	Q8_0:     {"q8_0", 32, 34, Q8_0, []int{0}},
	Q8_1:     {"q8_1", 32, 36, Q8_1, []int{0, 2}},
	Q2_K:     {"q2_K", 256, 84, Q2_K, []int{80, 82}},
	Q3_K:     {"q3_K", 256, 110, Q3_K, []int{108}},
	Q4_K:     {"q4_K", 256, 144, Q4_K, []int{0, 2}},
	Q5_K:     {"q5_K", 256, 176, Q5_K, []int{0, 2}},
	Q6_K:     {"q6_K", 256, 210, Q6_K, []int{208}},
	Q8_K:     {"q8_K", 256, 292, Q8_K, nil},
	IQ2_XXS:  {"iq2_xxs", 256, 66, IQ2_XXS, []int{0}},
	IQ2_XS:   {"iq2_xs", 256, 74, IQ2_XS, []int{0}},
	IQ3_XXS:  {"iq3_xxs", 256, 98, IQ3_XXS, []int{0}},
	IQ1_S:    {"iq1_s", 256, 50, IQ1_S, []int{0}},
	IQ4_NL:   {"iq4_nl", 32, 18, IQ4_NL, []int{0}},
	IQ3_S:    {"iq3_s", 256, 110, IQ3_S, []int{0}},
	IQ2_S:    {"iq2_s", 256, 82, IQ2_S, []int{0}},
	IQ4_XS:   {"iq4_xs", 256, 136, IQ4_XS, []int{0}},
	I8:       {"i8", 1, 1, I8, nil},
	I16:      {"i16", 1, 2, I16, nil},
	I32:      {"i32", 1, 4, I32, nil},
	I64:      {"i64", 1, 8, I64, nil},
	F64:      {"f64", 1, 8, F64, nil},
	IQ1_M:    {"iq1_m", 256, 56, IQ1_M, nil},
	BF16:     {"bf16", 1, 2, BF16, nil},
	TQ1_0:    {"tq1_0", 256, 54, TQ1_0, []int{52}},
	TQ2_0:    {"tq2_0", 256, 66, TQ2_0, []int{64}},
	MXFP4:    {"mxfp4", 32, 17, MXFP4, nil},
	NVFP4:    {"nvfp4", 64, 36, NVFP4, nil},
	Q1_0:     {"q1_0", 128, 18, Q1_0, []int{0}},
	Q2_0:     {"q2_0", 64, 18, Q2_0, []int{0}},
	PQ2_0:    {"pq2_0", 128, 34, PQ2_0, []int{0}},
	PTQ1_0:   {"ptq1_0", 128, 28, PTQ1_0, []int{26}},
	Q2_0G128: {"q2_0_g128", 128, 34, Q2_0, []int{0}},
}

// Known reports whether t is in the type table.
func (t Type) Known() bool { _, ok := typeTable[t]; return ok }

// String is ggml's name for the type ("q1_0", "f32"...), or "type(N)".
func (t Type) String() string {
	if ti, ok := typeTable[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements per block (1 for plain floats), or 0
// for an unknown type.
func (t Type) BlockSize() int { return typeTable[t].blockSize }

// BlockBytes is the number of bytes per block, or 0 for an unknown type.
func (t Type) BlockBytes() int { return typeTable[t].blockBytes }

// scaleOffsets are the byte offsets of a quantized block's f16 scales, nil
// for a type without them (or one whose scales FirstNonFinite does not know).
func (t Type) scaleOffsets() []int { return typeTable[t].scales }

// diskID is the id written to files: Q2_0G128 is stored as Q2_0.
func (t Type) diskID() Type { return typeTable[t].onDisk }

// RowBytes is the size in bytes of n consecutive elements of type t. n must
// be a non-negative multiple of the block size.
func (t Type) RowBytes(n int64) (int64, error) {
	ti, ok := typeTable[t]
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrUnknownType, t)
	}
	bs := int64(ti.blockSize)
	if n < 0 || n%bs != 0 {
		return 0, fmt.Errorf("%w: %d elements is not a whole number of %s blocks of %d", ErrShape, n, t, bs)
	}
	blocks := n / bs
	if blocks > math.MaxInt64/int64(ti.blockBytes) {
		return 0, fmt.Errorf("%w: %d elements of %s overflow int64 bytes", ErrShape, n, t)
	}
	return blocks * int64(ti.blockBytes), nil
}

// ParseType finds a type by its name, ignoring case ("q1_0", "Q4_K",
// "q2_0_g128"), for command-line flags.
func ParseType(name string) (Type, error) {
	for t, ti := range typeTable {
		if strings.EqualFold(ti.name, name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownType, name)
}
