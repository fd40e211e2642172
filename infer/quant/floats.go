package quant

import (
	"encoding/binary"
	"math"
)

// Plain float types: one element per block, little-endian.

func le16(b []byte, i int) uint16 { return binary.LittleEndian.Uint16(b[i:]) }

func f16at(b []byte, i int) float32 { return F16ToF32(le16(b, i)) }

func f32at(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[i:])) }

func dequantizeF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = f32at(src, 4*i)
	}
}

func quantizeF32(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func dequantizeF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = f16at(src, 2*i)
	}
}

func quantizeF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
	}
}

func dequantizeBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = BF16ToF32(le16(src, 2*i))
	}
}

func quantizeBF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
}

// The float dot products keep eight partial sums, as ggml's SIMD loops keep
// vector accumulators, and add them pairwise at the end.

func dotF32(n int, w, x []byte) float32 {
	var acc [8]float32
	i := 0
	for ; i+8 <= n; i += 8 {
		for l := range acc {
			acc[l] += f32at(w, 4*(i+l)) * f32at(x, 4*(i+l))
		}
	}
	for ; i < n; i++ {
		acc[0] += f32at(w, 4*i) * f32at(x, 4*i)
	}
	return sum8(&acc)
}

func dotF16(n int, w, x []byte) float32 {
	var acc [8]float32
	i := 0
	for ; i+8 <= n; i += 8 {
		for l := range acc {
			acc[l] += f16at(w, 2*(i+l)) * f16at(x, 2*(i+l))
		}
	}
	for ; i < n; i++ {
		acc[0] += f16at(w, 2*i) * f16at(x, 2*i)
	}
	return sum8(&acc)
}

func dotBF16(n int, w, x []byte) float32 {
	var acc [8]float32
	i := 0
	for ; i+8 <= n; i += 8 {
		for l := range acc {
			acc[l] += BF16ToF32(le16(w, 2*(i+l))) * BF16ToF32(le16(x, 2*(i+l)))
		}
	}
	for ; i < n; i++ {
		acc[0] += BF16ToF32(le16(w, 2*i)) * BF16ToF32(le16(x, 2*i))
	}
	return sum8(&acc)
}

func sum8(a *[8]float32) float32 {
	return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
}
