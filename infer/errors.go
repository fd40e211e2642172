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
	// ErrUnsupportedOp: the backend has no kernel for an op the network
	// needs (a hybrid layer's op on a backend that lacks it).
	ErrUnsupportedOp = errors.New("unsupported operation")
	// ErrStateMismatch: a recurrent network's state does not belong to the
	// position a pass starts at, and no snapshot for it exists; the caller
	// must run the sequence again from position 0.
	ErrStateMismatch = errors.New("recurrent state does not match the position")
	// ErrBackendUnavailable: the backend exists but cannot run here (no GPU
	// adapter, for instance).
	ErrBackendUnavailable = errors.New("backend unavailable")
)
