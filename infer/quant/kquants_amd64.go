package quant

//go:generate sh -c "cd asm && BONSAI_ASM_SET=kquants go run . -out ../kquants_amd64.s -stubs ../kquants_stub_amd64.go -pkg quant"

import "encoding/binary"

// The Q4_K, Q5_K and Q6_K kernels (asm/kquants.go) are x16 kernel sets
// (isa_amd64.go): same driver (simdProduct), same 8-token activation
// tiles, their own packed layouts and their own Q8_K planes.

// layoutQ4_K packs 16 rows × one super-block as asm/kquants.go reads it:
// 32 chunks of 64 bytes (chunk 8k+g, byte 4r+e = row r's qs[32k+4g+e], so
// a chunk's low nibbles are sub-block 2k and its high nibbles 2k+1), then
// the scales [8][16], the min pairs [4][16][2], d [16] and dmin [16]. The
// scales and mins are unpacked from their 6-bit form once here instead of
// once per token in the kernel.
var layoutQ4_K = &packedLayout{cols: qkK, blockBytes: 2368, scales: 2304, pack: func(rows *[packRows][]byte, dst []byte) {
	for r, blk := range rows {
		if blk == nil {
			continue // zero codes, scales and d: the row sums to 0
		}
		for c := 0; c < 32; c++ {
			copy(dst[64*c+4*r:][:4], blk[16+4*c:])
		}
		for j := 0; j < 8; j++ {
			sc, m := scaleMinK4(j, blk[4:16])
			dst[2048+16*j+r] = sc
			dst[2176+32*(j/2)+2*r+j%2] = m
		}
		copy(dst[2336+2*r:][:2], blk[2:4])
	}
}}

// layoutQ5_K packs 16 rows × one super-block as asm/kquants.go reads it,
// in the file's 5.5 bits per weight: Q4_K's 32 chunks of nibbles, the 5th
// bits as 64 byte masks (word 8j+g, bit 4r+e: bit j of row r's qh[4g+e],
// i.e. of column 32j+4g+e), the file's 12 scale bytes as three
// chunks of one dword per row (chunk i, byte 4r+e = scales[4i+e]), d [16]
// and dmin [16]. The scales stay 6-bit: the kernel unpacks them once per
// super-block for all its tokens.
var layoutQ5_K = &packedLayout{cols: qkK, blockBytes: 2816, scales: 2752, pack: func(rows *[packRows][]byte, dst []byte) {
	for r, blk := range rows {
		if blk == nil {
			continue
		}
		for c := 0; c < 32; c++ {
			copy(dst[64*c+4*r:][:4], blk[48+4*c:])
		}
		for i := 0; i < 3; i++ {
			copy(dst[2560+64*i+4*r:][:4], blk[4+4*i:])
		}
		copy(dst[2784+2*r:][:2], blk[2:4])
	}
	for j := 0; j < 8; j++ {
		for g := 0; g < 8; g++ {
			binary.LittleEndian.PutUint64(dst[2048+8*(8*j+g):], bitPlane(rows, g, j, q5High))
		}
	}
}}

// q5High is column c's qh byte (bit j: the 5th bit of column 32j+c).
func q5High(blk []byte, c int) byte { return blk[16+c] }

// layoutQ6_K packs 16 rows × one super-block as asm/kquants.go reads it,
// in the file's 6.56 bits per weight: with u = q+32 and group G columns
// 4G…4G+3, 48 chunks (chunk 3i+k, byte 4r+e: group 4i+k's u in bits 0-5,
// bits 2k and 2k+1 of group 4i+3's in bits 6-7), the scales [16][16] and d
// [16].
var layoutQ6_K = &packedLayout{cols: qkK, blockBytes: 3360, scales: 3328, pack: func(rows *[packRows][]byte, dst []byte) {
	for r, blk := range rows {
		if blk == nil {
			continue
		}
		ql, qh := blk[0:128], blk[128:192]
		u := func(G, e int) byte { return byte(q6Value(ql, qh, 4*G+e) + 32) }
		for i := 0; i < 16; i++ {
			for e := 0; e < 4; e++ {
				for k := 0; k < 3; k++ {
					dst[64*(3*i+k)+4*r+e] = u(4*i+k, e) | u(4*i+3, e)>>(2*k)<<6
				}
			}
			dst[3072+16*i+r] = blk[192+i]
		}
		copy(dst[3328+2*r:][:2], blk[208:210]) // repack put the first two bytes there
	}
}}

// fillPlanesQ8_K lays out token t of Q8_K activations for the K-quant
// kernels, in the planes the Q8_0 kernels use (per tile of 8 tokens, the
// tile's negq and dk regions each N bytes, 256 per super-block):
//
//	qs   [N/4 groups][8 tokens] 4 bytes         as for Q8_0
//	negq [N/256][8 pairs][8 tokens] 2×i16       −(sums per 16), (−b_2L, −b_2L+1), for Q6_K
//	dk   [N/256] { [8 tokens] float32           the super-block's d
//	             [4 pairs][8 tokens] 2×i16 }    sums per 32, (b_2k, b_2k+1), for Q4_K
func (a *Activations) fillPlanesQ8_K(t int) {
	p := a.planes
	tile, lane := t/tileTokens, t%tileTokens
	src := a.Token(t)
	qs := p.qs[tile*tileTokens*a.N:]
	sums := p.negq[tile*tileTokens*a.N/8:]
	dk := p.dk[tile*tileTokens*a.N/8:]
	for b := 0; b < a.N/qkK; b++ {
		blk := src[b*q8_KBytes : (b+1)*q8_KBytes]
		for g := 0; g < qkK/4; g++ {
			copy(qs[4*((qkK/4*b+g)*tileTokens+lane):][:4], blk[4+4*g:])
		}
		for L := 0; L < 8; L++ {
			lo, hi := -bsum(blk, 2*L), -bsum(blk, 2*L+1)
			binary.LittleEndian.PutUint32(sums[256*b+4*(L*tileTokens+lane):], pairI16(lo, hi))
		}
		sb := dk[256*b:]
		copy(sb[4*lane:][:4], blk[:4])
		for k := 0; k < 4; k++ {
			lo := bsum(blk, 4*k) + bsum(blk, 4*k+1)
			hi := bsum(blk, 4*k+2) + bsum(blk, 4*k+3)
			binary.LittleEndian.PutUint32(sb[32+4*(k*tileTokens+lane):], pairI16(lo, hi))
		}
	}
}

// pairI16 packs two int16 values (as VPDPWSSD reads a dword).
func pairI16(lo, hi int32) uint32 { return uint32(uint16(lo)) | uint32(uint16(hi))<<16 }
