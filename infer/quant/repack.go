package quant

import "encoding/binary"

// Repacked weights for the SIMD kernels (see asm/main.go): rows in groups
// of 16, the last group padded with zero rows; per group, per block of
// columns, the expansion data of 16 rows then their 16 f16 scales. Each
// layout keeps the file's bits per weight.
const packRows = 16

// packed describes one type's packed layout.
type packedLayout struct {
	cols       int // columns per packed block
	blockBytes int // bytes per 16 rows × cols
	scales     int // offset of the 16 f16 scales
	dAt        int // offset of the f16 d in the file's block
	// pack writes the expansion data of one block: rows[r] is row r's block
	// in the file's layout (nil for padding rows).
	pack func(rows *[packRows][]byte, dst []byte)
}

// repack builds the packed copy of m in layout l.
func repack(m *Matrix, l *packedLayout) []byte {
	srcBlock := m.Type.BlockBytes() * l.cols / m.Type.BlockSize()
	blocks := m.Cols / l.cols
	groups := (m.Rows + packRows - 1) / packRows
	out := make([]byte, groups*blocks*l.blockBytes)
	var rows [packRows][]byte
	for g := 0; g < groups; g++ {
		for b := 0; b < blocks; b++ {
			dst := out[(g*blocks+b)*l.blockBytes:][:l.blockBytes]
			for r := range rows {
				rows[r] = nil
				if row := g*packRows + r; row < m.Rows {
					rows[r] = m.Row(row)[b*srcBlock:][:srcBlock]
					copy(dst[l.scales+2*r:], rows[r][l.dAt:l.dAt+2])
				}
			}
			l.pack(&rows, dst)
		}
	}
	return out
}

// bitPlanes packs, for each group of 4 columns, bit `bit` of each weight's
// code into a u64: bit 4r+e = row r, column 4g+e. code(row, j) reads the
// file's layout.
func bitPlane(rows *[packRows][]byte, g, bit int, code func(blk []byte, j int) byte) uint64 {
	var w uint64
	for r, blk := range rows {
		if blk == nil {
			continue
		}
		for e := 0; e < 4; e++ {
			w |= uint64(code(blk, 4*g+e)>>bit&1) << (4*r + e)
		}
	}
	return w
}

func q2Code(blk []byte, j int) byte { return blk[2+j/4] >> (2 * (j % 4)) & 3 }
func q4Code(blk []byte, j int) byte {
	if j < 16 {
		return blk[2+j] & 0xf
	}
	return blk[2+j-16] >> 4
}

var (
	// layoutQ1_0 (asm/q1_0.go): four 64-byte chunks k, dword r of chunk k
	// holding row r's bits of groups 8k…8k+7 as nibbles (bit 4j+e = column
	// 4(8k+j)+e), then the 16 f16 scales.
	layoutQ1_0 = &packedLayout{cols: 128, blockBytes: 288, scales: 256, pack: func(rows *[packRows][]byte, dst []byte) {
		for r, blk := range rows {
			if blk == nil {
				continue
			}
			for k := 0; k < 4; k++ {
				binary.LittleEndian.PutUint32(dst[64*k+4*r:], binary.LittleEndian.Uint32(blk[2+4*k:]))
			}
		}
	}}
	layoutQ2_0     = q2Layout(64)
	layoutQ2_0G128 = q2Layout(128)
	layoutQ4_0     = &packedLayout{cols: 32, blockBytes: 288, scales: 256, pack: func(rows *[packRows][]byte, dst []byte) {
		for p := 0; p < 4; p++ {
			for r, blk := range rows {
				if blk == nil {
					continue
				}
				for e := 0; e < 4; e++ {
					dst[64*p+4*r+e] = q4Code(blk, 8*p+e) | q4Code(blk, 8*p+4+e)<<4
				}
			}
		}
	}}
	layoutQ8_0 = &packedLayout{cols: 32, blockBytes: 544, scales: 512, pack: func(rows *[packRows][]byte, dst []byte) {
		for g := 0; g < 8; g++ {
			for r, blk := range rows {
				for e := 0; e < 4; e++ {
					q := byte(0) // padding rows: weight 0 is u = 128
					if blk != nil {
						q = blk[2+4*g+e]
					}
					dst[64*g+4*r+e] = q ^ 0x80
				}
			}
		}
	}}
)

// q2Layout holds 4 groups of 4 columns per 64-byte chunk, two bits per
// code: byte 4r+e of chunk p = row r's codes of columns 16p + 4j + e at bits
// 2j, j = 0..3, so a shift and a mask yield group 4p+j. Rows 8–15 are the
// chunk's upper half, as the AVX2 kernels want. Q2_0, the legacy Q2_0G128
// and PQ2_0 (the same codec as Q2_0G128) share it.
func q2Layout(cols int) *packedLayout {
	return &packedLayout{cols: cols, blockBytes: 4*cols + 32, scales: 4 * cols, pack: func(rows *[packRows][]byte, dst []byte) {
		for p := 0; p < cols/16; p++ {
			for r, blk := range rows {
				if blk == nil {
					continue
				}
				for e := 0; e < 4; e++ {
					var b byte
					for j := 0; j < 4; j++ {
						b |= q2Code(blk, 16*p+4*j+e) << (2 * j)
					}
					dst[64*p+4*r+e] = b
				}
			}
		}
	}}
}

// layoutPTQ1_0 keeps PTQ1_0's size (448 bytes per 16 rows × 128 columns, as
// in the file), so the copy is no larger than the file pages it replaces: chunk c (0..5, 64 bytes)
// holds groups 5c … 5c+4 as trits n = 0..4 of byte 4r+e (row r, column
// 4(5c+n)+e), and the 32-byte tail holds groups 30 and 31: trit n of byte
// 4i+e is row i + 8·(n%2) of group 30 + n/2 (i < 8, the fifth trit 0). Bytes
// are canonical (ceil(256·N/243)); the kernels shift trit n+1 to the top as
// v ← 3·v mod 256 and read the top trit as [v > 85] + [v > 170].
var layoutPTQ1_0 = &packedLayout{cols: 128, blockBytes: 448, scales: 416, dAt: ptq1_0D, pack: func(rows *[packRows][]byte, dst []byte) {
	trit := func(r, j int) uint8 {
		if rows[r] == nil {
			return 1 // padding rows: zeros
		}
		return ptq1Trit(rows[r], j)
	}
	for c := 0; c < 6; c++ {
		for r := 0; r < packRows; r++ {
			for e := 0; e < 4; e++ {
				var t [5]uint8
				for n := range t {
					t[n] = trit(r, 4*(5*c+n)+e)
				}
				dst[64*c+4*r+e] = tritByte(t)
			}
		}
	}
	for i := 0; i < 8; i++ {
		for e := 0; e < 4; e++ {
			t := [5]uint8{trit(i, 120+e), trit(8+i, 120+e), trit(i, 124+e), trit(8+i, 124+e), 0}
			dst[384+4*i+e] = tritByte(t)
		}
	}
}}
