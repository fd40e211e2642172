package gpu

import "errors"

// Errors callers branch on to fall back to the CPU backend.
var (
	// ErrNoAdapter: no WebGPU adapter (no Vulkan/Metal/GL driver), or none
	// matching the --adapter filter.
	ErrNoAdapter = errors.New("no GPU adapter")
	// ErrOutOfMemory: the model, KV cache and scratch do not fit the device
	// limits, or a buffer allocation failed.
	ErrOutOfMemory = errors.New("not enough GPU memory")
	// ErrDeviceLost: the device stopped answering (driver reset, removal).
	ErrDeviceLost = errors.New("GPU device lost")
	// ErrUnsupported: the model uses a tensor type or shape this backend
	// has no kernel for.
	ErrUnsupported = errors.New("not supported on the GPU backend")
)
