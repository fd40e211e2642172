package gguf

import "encoding/binary"

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
	if offs := t.scaleOffsets(); offs != nil {
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
