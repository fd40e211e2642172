package infer

import "errors"

// Sentinel errors callers branch on; wrapped with details where they occur.
var (
	// ErrUnsupportedArch: general.architecture names no registered
	// architecture.
	ErrUnsupportedArch = errors.New("unsupported model architecture")
	// ErrUnsupportedType: a tensor type has no kernel on this backend.
	ErrUnsupportedType = errors.New("unsupported tensor type")
	// ErrMissingTensor: the file lacks a tensor the architecture needs.
	ErrMissingTensor = errors.New("missing tensor")
	// ErrBadShape: a tensor or activation has the wrong shape.
	ErrBadShape = errors.New("bad tensor shape")
	// ErrContextFull: the tokens do not fit the KV cache.
	ErrContextFull = errors.New("context full")
	// ErrInterrupted: the caller stopped a prefill between batches.
	ErrInterrupted = errors.New("interrupted")
	// ErrUnknownBackend: no backend is registered under the name.
	ErrUnknownBackend = errors.New("unknown backend")
	// ErrBackendUnavailable: the backend exists but cannot run here (no GPU
	// adapter, for instance).
	ErrBackendUnavailable = errors.New("backend unavailable")
)
