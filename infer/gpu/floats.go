package gpu

import (
	"encoding/binary"
	"math"
)

func mathFloat32bits(f float32) uint32 { return math.Float32bits(f) }

// bytesToFloats decodes little-endian f32s.
func bytesToFloats(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[i*4:]))
	}
}

// floatsToBytes encodes f32s little-endian.
func floatsToBytes(src []float32) []byte {
	out := make([]byte, 4*len(src))
	for i, v := range src {
		binary.LittleEndian.PutUint32(out[i*4:], math.Float32bits(v))
	}
	return out
}
