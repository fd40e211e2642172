package quant

//go:generate sh -c "cd asm && BONSAI_ASM_SET=legacy go run . -out ../legacy_amd64.s -stubs ../legacy_stub_amd64.go -pkg quant"

// The packed layouts of Q4_1, Q5_0 and Q5_1 for their SIMD kernels
// (asm/legacy.go): Q4_0's nibble chunks, then for the 5-bit types a
// 64-byte plane of fifth bits (byte 4r+e, bit g: row r, column 4g+e), then
// the 16 f16 d and for the _1 types the 16 f16 m. Bits per weight stay the
// file's.
var (
	layoutQ4_1 = legacyLayout(4, -1, 320, 256, 288)
	layoutQ5_0 = legacyLayout(6, 2, 352, 320, 0)
	layoutQ5_1 = legacyLayout(8, 4, 384, 320, 352)
)

// legacyLayout: the file's block has its nibbles at qsAt, its fifth bits
// (if hAt ≥ 0) at hAt and its m (if mAt > 0 in the packed block) at 2.
func legacyLayout(qsAt, hAt, blockBytes, scales, mAt int) *packedLayout {
	return &packedLayout{cols: 32, blockBytes: blockBytes, scales: scales, pack: func(rows *[packRows][]byte, dst []byte) {
		for r, blk := range rows {
			if blk == nil {
				continue
			}
			code := func(j int) byte {
				if hAt >= 0 {
					return q5Code(blk, hAt, j)
				}
				return q4Code(blk[qsAt-2:], j)
			}
			for p := 0; p < 4; p++ {
				for e := 0; e < 4; e++ {
					dst[64*p+4*r+e] = code(8*p+e)&0xf | (code(8*p+4+e)&0xf)<<4
				}
			}
			if hAt >= 0 {
				for e := 0; e < 4; e++ {
					var b byte
					for g := 0; g < 8; g++ {
						b |= code(4*g+e) >> 4 << g
					}
					dst[256+4*r+e] = b
				}
			}
			if mAt > 0 {
				copy(dst[mAt+2*r:], blk[2:4])
			}
		}
	}}
}
