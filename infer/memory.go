package infer

import "github.com/bonsai-chat/bonsai/gguf"

// Memory is what a model costs, in bytes, for `bonsai info` and the status
// line.
type Memory struct {
	FileBytes   int64 // the whole GGUF file (mapped)
	WeightBytes int64 // tensor data in the file
	KVAlloc     int64 // the KV cache as allocated (whole context)
	KVUsed      int64 // the part of it holding tokens
	Activations int64 // backend activation buffers
	Repacked    int64 // weight copies a fast kernel made
}

// KVBytesPerToken is the f16 K and V of one position over the layers that
// keep them.
func KVBytesPerToken(h Hyperparams) int64 {
	layers := h.Layers
	if h.KVLayers > 0 {
		layers = h.KVLayers
	}
	return KVSpec{Layers: layers, Context: 1, KVHeads: h.KVHeads, HeadDim: h.HeadDim}.Bytes()
}

// WeightBytes sums the sizes of f's tensors.
func WeightBytes(f *gguf.File) int64 {
	var n int64
	for i := range f.Tensors {
		n += f.Tensors[i].Size
	}
	return n
}

// EstimateMemory is what loading f with a context of ctx tokens needs before
// activations: the file's weights and the full KV cache.
func EstimateMemory(f *gguf.File, h Hyperparams, ctx int) Memory {
	return Memory{
		FileBytes:   int64(len(f.Bytes())),
		WeightBytes: WeightBytes(f),
		KVAlloc:     KVBytesPerToken(h) * int64(ctx),
	}
}

// Memory reports the model's memory with used tokens in the KV cache.
func (m *Model) Memory(used int) Memory {
	mem := EstimateMemory(m.File, m.Hparams, m.context)
	mem.KVUsed = KVBytesPerToken(m.Hparams) * int64(used)
	if m.backend != nil {
		bm := m.backend.Memory()
		mem.Activations = bm.Activations
		mem.Repacked = bm.Repacked
		mem.KVAlloc = bm.KV
	}
	return mem
}
