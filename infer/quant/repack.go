package quant

import "encoding/binary"

// Repacked Q1_0 for the SIMD kernels: rows in groups of 16 (the last group
// padded with zero rows); per group and 128-column block, 288 bytes:
//
//	32 × u64: word g holds columns 4g..4g+3 of the 16 rows, bit 4r+e = bit of
//	          row r, column 4g+e (so one 512-bit mask expands to 16 lanes ×
//	          4 columns)
//	16 × f16: d of each row
//
// That is the same 1.125 bits per weight as the file, in an order where one
// VPDPBUSD produces one partial sum per row.
const (
	packRows      = 16
	q1PackedBlock = 288
)

// repackQ1_0 builds the packed copy of m (Q1_0).
func repackQ1_0(m *Matrix) []byte {
	blocks := m.Cols / qk1_0
	groups := (m.Rows + packRows - 1) / packRows
	out := make([]byte, groups*blocks*q1PackedBlock)
	var words [32]uint64
	for g := 0; g < groups; g++ {
		for b := 0; b < blocks; b++ {
			dst := out[(g*blocks+b)*q1PackedBlock:][:q1PackedBlock]
			clear(words[:])
			for r := 0; r < packRows && g*packRows+r < m.Rows; r++ {
				src := m.Row(g*packRows + r)[b*q1_0Bytes:]
				copy(dst[256+2*r:], src[:2])
				lo := binary.LittleEndian.Uint64(src[2:])
				hi := binary.LittleEndian.Uint64(src[10:])
				for n := 0; n < 16; n++ {
					words[n] |= (lo >> (4 * n) & 0xf) << (4 * r)
					words[16+n] |= (hi >> (4 * n) & 0xf) << (4 * r)
				}
			}
			for n, w := range words {
				binary.LittleEndian.PutUint64(dst[8*n:], w)
			}
		}
	}
	return out
}
