// Package infer loads GGUF language models and runs them: the Backend
// interface that the CPU (infer/cpu) and GPU (infer/gpu) implement, the
// architecture registry with the Qwen3 forward pass, the KV cache sizing,
// variant detection and memory accounting.
package infer
