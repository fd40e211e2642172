package cpu

import "unsafe"

// unsafeFloats reinterprets little-endian f32 bytes in place, so that F32
// norm weights are read from the mapping without a copy. GGUF aligns tensor
// data to at least 32 bytes, which satisfies float32 alignment.
func unsafeFloats(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// uintptrOf is the address of b's first byte.
func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// unsafeHalves reinterprets little-endian f16 bytes in place (a quantized
// cache's f16 side). Its rows start at even offsets of a fresh allocation.
func unsafeHalves(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}
