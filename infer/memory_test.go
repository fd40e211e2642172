package infer_test

import (
	"bytes"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// StateSpecs sizes a hybrid file's state from its metadata: the figures of
// Bonsai 27B (64 blocks, one in four full attention; 48 V heads of 128×128
// per DeltaNet layer), and a dense file's KV cache in every layer.
func TestStateSpecs(t *testing.T) {
	w := gguf.NewWriter()
	for k, v := range map[string]any{
		"general.architecture":           "qwen35",
		"qwen35.full_attention_interval": uint32(4),
		"qwen35.ssm.state_size":          uint32(128),
		"qwen35.ssm.group_count":         uint32(16),
		"qwen35.ssm.time_step_rank":      uint32(48),
		"qwen35.ssm.inner_size":          uint32(6144),
		"qwen35.ssm.conv_kernel":         uint32(4),
	} {
		w.Set(k, v)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	h := infer.Hyperparams{Arch: "qwen35", Layers: 64, Heads: 24, KVHeads: 4, HeadDim: 256}
	kv, rs := infer.StateSpecs(f, h, 1)
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
	mem := infer.EstimateMemory(f, h, 4096, 0)
	if mem.KVAlloc != 4096*64<<10 || mem.Recurrent != rs.Bytes() || mem.SnapshotsMax != infer.DefaultSnapshots*rs.Bytes() {
		t.Errorf("estimate %+v", mem)
	}
	if mem.State() != mem.KVAlloc+mem.Recurrent+mem.SnapshotsMax {
		t.Errorf("State() %d", mem.State())
	}

	dense := infer.Hyperparams{Arch: "qwen3", Layers: 28, KVHeads: 8, HeadDim: 128}
	kv, rs = infer.StateSpecs(f, dense, 2)
	if kv.Layers != 28 || kv.Bytes() != 2*infer.KVBytesPerToken(dense) || rs.Bytes() != 0 {
		t.Errorf("dense: KV %+v, recurrent %+v", kv, rs)
	}
}
