package infer_test

import (
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// StateSpecs sizes a hybrid file's state as its network lays it out,
// without building it; Qwen35Params gives Bonsai 27B's figures (64 blocks,
// one in four full attention; 48 V heads of 128×128 per DeltaNet layer); a
// dense file has its KV cache in every layer.
func TestStateSpecs(t *testing.T) {
	p := infer.Qwen35Params{
		Hyperparams: infer.Hyperparams{Arch: "qwen35", Layers: 64, Heads: 24, KVHeads: 4, HeadDim: 256},
		ConvKernel:  4, StateSize: 128, KHeads: 16, VHeads: 48, Recurrent: make([]bool, 64),
	}
	for i := range p.Recurrent {
		p.Recurrent[i] = (i+1)%4 != 0
	}
	kv, rs := p.KVSpec(1), p.RecurrentSpec()
	if kv.Layers != 16 || kv.Bytes() != 64<<10 {
		t.Errorf("KV %+v: %d bytes per token, want 16 layers, 64 KiB", kv, kv.Bytes())
	}
	want := infer.RecurrentSpec{Layers: 48, Channels: 10240, ConvWidth: 4, VHeads: 48, HeadDim: 128}
	if rs != want {
		t.Errorf("recurrent %+v, want %+v", rs, want)
	}
	// 48 layers × (3 conv rows of 10240 + 48 × 128²) f32.
	if got := rs.Bytes(); got != 48*(3*10240+48*128*128)*4 {
		t.Errorf("recurrent state %d bytes", got)
	}

	f := qwen35File(t, gguf.F32)
	h, err := infer.ReadQwen35Params(f)
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Threads: 1, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	kv, rs = infer.StateSpecs(f, h.Hyperparams, 64)
	if kv != m.KVSpec() || rs != m.RecurrentSpec() {
		t.Errorf("StateSpecs %+v %+v, the built network %+v %+v", kv, rs, m.KVSpec(), m.RecurrentSpec())
	}
	mem := infer.EstimateMemory(f, h.Hyperparams, 4096, 0, infer.KVTypes{})
	if mem.KVAlloc != 4096*kv.Bytes()/64 || mem.Recurrent != rs.Bytes() || mem.SnapshotsMax != infer.DefaultSnapshots*rs.Bytes() {
		t.Errorf("estimate %+v", mem)
	}
	if mem.State() != mem.KVAlloc+mem.Recurrent+mem.SnapshotsMax {
		t.Errorf("State() %d", mem.State())
	}

	dense := infer.Hyperparams{Arch: "qwen3", Layers: 28, KVHeads: 8, HeadDim: 128}
	kv, rs = infer.StateSpecs(f, dense, 2)
	if kv.Layers != 28 || kv.Bytes() != 2*infer.KVBytesPerToken(dense, infer.KVTypes{}) || rs.Bytes() != 0 {
		t.Errorf("dense: KV %+v, recurrent %+v", kv, rs)
	}
}
