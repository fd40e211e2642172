package quant

import "github.com/bonsai-chat/bonsai/gguf"

// planes is extra per-token activation data for the amd64 kernels; the
// NEON kernels read the activations as they are.
type planes struct{}

func (a *Activations) preparePlanes(gguf.Type) {}

func (a *Activations) fillPlanes(int, int, int) {}

func (a *Activations) planesFor(gguf.Type) bool { return true }

func dotsF16SIMD([]float32, []uint16, int, []float32) bool         { return false }
func weightedSumF16SIMD([]float32, []uint16, int, []float32) bool  { return false }
func weightedSumF16TSIMD([]float32, []uint16, int, []float32) bool { return false }

func quantizeQ8_0SIMD([]float32, []byte) bool { return false }

func swigluSIMD(_, _, _ []float32) int { return 0 }

func softmaxF16SIMD([]float32, float32) bool { return false }

func f32ToF16sSIMD([]uint16, []float32) bool { return false }
func roundF16sSIMD(_, _ []float32) bool      { return false }

func firstAboveSIMD([]float32, float32, bool) (int, int)             { return 0, 0 }
func dotsF16VecSIMD([]float32, []uint16, int, []float32) bool        { return false }
func weightedSumF16VecSIMD([]float32, []uint16, int, []float32) bool { return false }
