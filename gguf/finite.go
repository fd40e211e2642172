package gguf

import "encoding/binary"

// scaleOffsets are the byte offsets of the f16 scales (d, and dmin or s
// where the type has one) inside a block of each quantized type, as ggml
// lays them out. A NaN or infinite scale makes its whole block garbage.
var scaleOffsets = map[Type][]int{
	Q4_0: {0}, Q4_1: {0, 2}, Q5_0: {0}, Q5_1: {0, 2}, Q8_0: {0}, Q8_1: {0, 2},
	Q2_K: {80, 82}, Q3_K: {108}, Q4_K: {0, 2}, Q5_K: {0, 2}, Q6_K: {208},
	IQ2_XXS: {0}, IQ2_XS: {0}, IQ3_XXS: {0}, IQ1_S: {0}, IQ4_NL: {0}, IQ3_S: {0}, IQ2_S: {0}, IQ4_XS: {0},
	TQ1_0: {52}, TQ2_0: {64},
	Q1_0: {0}, Q2_0: {0}, Q2_0G128: {0}, PQ2_0: {0}, PTQ1_0: {26},
}

// FirstNonFinite finds a NaN or infinity in tensor data of type t: it
// returns the index of the first such element of a float tensor (f32, f16,
// bf16), or of the first block of a quantized tensor whose scale is one,
// and -1 when there is none (or t has no scale it knows).
func FirstNonFinite(t Type, data []byte) int {
	switch t {
	case F32:
		for i := 0; i+4 <= len(data); i += 4 {
			if binary.LittleEndian.Uint32(data[i:])&0x7f800000 == 0x7f800000 {
				return i / 4
			}
		}
		return -1
	case F16:
		return firstAllOnes(data, 2, []int{0}, 0x7c00)
	case BF16:
		return firstAllOnes(data, 2, []int{0}, 0x7f80)
	}
	if offs, ok := scaleOffsets[t]; ok {
		return firstAllOnes(data, t.BlockBytes(), offs, 0x7c00)
	}
	return -1
}

// firstAllOnes is the first stride-sized block with a 16-bit value at one
// of offs whose exponent bits (exp) are all ones.
func firstAllOnes(data []byte, stride int, offs []int, exp uint16) int {
	for b, i := 0, 0; i+stride <= len(data); b, i = b+1, i+stride {
		for _, o := range offs {
			if binary.LittleEndian.Uint16(data[i+o:])&exp == exp {
				return b
			}
		}
	}
	return -1
}
