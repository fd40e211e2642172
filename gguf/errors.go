package gguf

import "errors"

// Sentinel errors. Every error from Parse and Open that is caused by the
// file's contents wraps one of them (a tensor lying past the end of the file
// wraps both ErrRange and ErrTruncated: the file may be cut or the offset
// wrong), so callers can branch with
// errors.Is while users read the message, which names the key or tensor.
var (
	// ErrNotGGUF: the file does not start with the GGUF magic.
	ErrNotGGUF = errors.New("not a GGUF file")
	// ErrVersion: a GGUF version this reader does not support (only 2 and 3).
	ErrVersion = errors.New("unsupported GGUF version")
	// ErrTruncated: the file ends before a structure it announces.
	ErrTruncated = errors.New("truncated GGUF file")
	// ErrCorrupt: a structure is inconsistent (bad value type, duplicate
	// key or tensor name, bad alignment, overlapping tensors...).
	ErrCorrupt = errors.New("corrupt GGUF file")
	// ErrUnknownType: a tensor type id missing from the type table.
	ErrUnknownType = errors.New("unknown tensor type")
	// ErrShape: a tensor shape that is invalid for its type (too many
	// dimensions, overflowing element count, row not a whole number of
	// blocks).
	ErrShape = errors.New("bad tensor shape")
	// ErrRange: a tensor's data lies (partly) outside the file.
	ErrRange = errors.New("tensor data out of range")
	// ErrOverlap: two tensors' data ranges overlap.
	ErrOverlap = errors.New("tensor data overlaps")
	// ErrMisaligned: a tensor's offset is not a multiple of the alignment.
	ErrMisaligned = errors.New("tensor data misaligned")
	// ErrNoKey: a metadata key is absent (returned by callers' helpers such
	// as Metadata.Require).
	ErrNoKey = errors.New("metadata key missing")
	// ErrKeyType: a metadata key holds a value of an unexpected type.
	ErrKeyType = errors.New("metadata value of wrong type")
	// ErrClosed: the file was closed and its mapping released.
	ErrClosed = errors.New("gguf file closed")
)
