// Package gguf reads and writes GGUF files (versions 2 and 3), the container
// llama.cpp and bonsai use for model weights and metadata.
//
// The reader validates everything it is about to trust (offsets, sizes,
// element counts, type ids, lengths) before using it, so a damaged or hostile
// file yields an error wrapping one of the sentinel errors below and never a
// panic, a hang or a huge allocation. Tensor data is memory-mapped read-only
// by Open and is never copied to the Go heap; Parse works on a byte slice.
//
// The package knows the file format only: what a tensor means is infer's job.
package gguf
