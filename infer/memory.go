package infer

import "github.com/bonsai-chat/bonsai/gguf"

// Memory is what a model costs, in bytes, for `bonsai info` and the status
// line. A conversation's state is the KV cache of the attention layers plus,
// on a recurrent network, the recurrent state and its snapshots.
type Memory struct {
	FileBytes   int64 // the whole GGUF file (mapped)
	WeightBytes int64 // tensor data in the file
	KVAlloc     int64 // the KV cache as allocated (whole context)
	KVUsed      int64 // the part of it holding tokens
	Recurrent   int64 // the recurrent state (RecurrentSpec.Bytes), whatever the tokens
	// Snapshots: host copies of the recurrent state held now, and the most
	// the model keeps (the estimate counts the most).
	Snapshots, SnapshotsMax int64
	Activations             int64 // backend activation buffers
	Repacked                int64 // weight copies a fast kernel made
}

// State is the conversation state as allocated: the KV cache, the
// recurrent state and the most its snapshots may take.
func (m Memory) State() int64 { return m.KVAlloc + m.Recurrent + m.SnapshotsMax }

// StateUsed is the state that holds something now: the used part of the KV
// cache, the recurrent state (always whole) and the snapshots held.
func (m Memory) StateUsed() int64 { return m.KVUsed + m.Recurrent + m.Snapshots }

// KVBytesPerToken is K and V of one position, of types t, over the layers
// that keep them (every layer of a dense transformer).
func KVBytesPerToken(h Hyperparams, t KVTypes) int64 {
	layers := h.Layers
	if h.KVLayers > 0 {
		layers = h.KVLayers
	}
	return KVSpec{Layers: layers, Context: 1, KVHeads: h.KVHeads, HeadDim: h.HeadDim, KVTypes: t}.Bytes()
}

// WeightBytes sums the sizes of f's tensors.
func WeightBytes(f *gguf.File) int64 {
	var n int64
	for i := range f.Tensors {
		n += f.Tensors[i].Size
	}
	return n
}

// StateSpecs sizes a conversation's state from f's metadata, without
// building the network: the KV cache for ctx tokens and the recurrent state,
// as the file's architecture lays them out (Architecture.State); a file the
// architecture would refuse, or a dense one, has K and V in every layer and
// no recurrent state.
func StateSpecs(f *gguf.File, h Hyperparams, ctx int) (KVSpec, RecurrentSpec) {
	dense := KVSpec{Layers: h.Layers, Context: ctx, KVHeads: h.KVHeads, HeadDim: h.HeadDim}
	arch, err := LookupArch(h.Arch)
	if err != nil || arch.State == nil {
		return dense, RecurrentSpec{}
	}
	kv, rs, err := arch.State(f, ctx)
	if err != nil {
		return dense, RecurrentSpec{}
	}
	return kv, rs
}

// EstimateMemory is what loading f with a context of ctx tokens needs before
// activations: the file's weights, the full KV cache of types t, the
// recurrent state and the most its snapshots take (snapshots as
// Options.Snapshots, 0 being the default).
func EstimateMemory(f *gguf.File, h Hyperparams, ctx, snapshots int, t KVTypes) Memory {
	kv, rs := StateSpecs(f, h, ctx)
	kv.KVTypes = t
	return Memory{
		FileBytes:    int64(len(f.Bytes())),
		WeightBytes:  WeightBytes(f),
		KVAlloc:      kv.Bytes(),
		Recurrent:    rs.Bytes(),
		SnapshotsMax: int64(snapshotLimit(rs, snapshots)) * rs.Bytes(),
	}
}

// snapshotLimit is how many snapshots of a state of rs a model keeps when
// Options.Snapshots is n.
func snapshotLimit(rs RecurrentSpec, n int) int {
	if rs.Bytes() <= 0 || n < 0 {
		return 0
	}
	if n == 0 {
		n = DefaultSnapshots
	}
	return max(1, min(n, int(SnapshotBudget/rs.Bytes())))
}

// Memory reports the model's memory with used tokens in the KV cache.
func (m *Model) Memory(used int) Memory {
	kv := m.KVSpec()
	mem := Memory{
		FileBytes:   int64(len(m.File.Bytes())),
		WeightBytes: WeightBytes(m.File),
		KVAlloc:     kv.Bytes(),
		KVUsed:      int64(min(max(used, 0), m.context)) * kv.BytesPerPosition(),
		Recurrent:   m.rspec.Bytes(),
	}
	mem.Snapshots, mem.SnapshotsMax = m.SnapshotBytes()
	if m.backend != nil {
		bm := m.backend.Memory()
		mem.Activations = bm.Activations
		mem.Repacked = bm.Repacked
		mem.KVAlloc = bm.KV
		if bm.Recurrent > 0 {
			mem.Recurrent = bm.Recurrent
		}
	}
	return mem
}
