package quant

//go:generate sh -c "cd asm && BONSAI_ASM_SET=q5_0 go run . -out ../q5_0_amd64.s -stubs ../q5_0_stub_amd64.go -pkg quant"

import "encoding/binary"

// layoutQ5_0 (asm/q5_0.go): Q4_0's nibble chunks of the low four bits,
// then per group of four columns the fifth bits as a 64-bit byte mask
// (bit 4r+e = row r, column 4g+e), then the 16 f16 scales.
var layoutQ5_0 = &packedLayout{cols: 32, blockBytes: 352, scales: 320, pack: func(rows *[packRows][]byte, dst []byte) {
	for p := 0; p < 4; p++ {
		for r, blk := range rows {
			if blk == nil {
				continue
			}
			for e := 0; e < 4; e++ {
				dst[64*p+4*r+e] = q5Code(blk, 8*p+e)&0xf | (q5Code(blk, 8*p+4+e)&0xf)<<4
			}
		}
	}
	for g := 0; g < 8; g++ {
		binary.LittleEndian.PutUint64(dst[256+8*g:], bitPlane(rows, g, 4, q5Code))
	}
}}
