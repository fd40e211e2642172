package tui

import (
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/engine"
)

// A recurrent model's state counts in the status line's gauge and the
// backend panel beside its KV cache; a dense model's gauge stays the KV's.
func TestGaugeCountsRecurrentState(t *testing.T) {
	const mib = 1 << 20
	s := statusLine{hasStats: true, stats: engine.Stats{ContextUsed: 10, ContextSize: 4096,
		KVUsedBytes: 1 * mib, KVAllocBytes: 256 * mib, StateBytes: 300 * mib, StateMaxBytes: 750 * mib}}
	if got := strings.Join(s.segments(), " | "); !strings.Contains(got, "KV+state 301 MiB/1006 MiB") {
		t.Errorf("recurrent gauge: %q", got)
	}
	s.stats.StateBytes, s.stats.StateMaxBytes = 0, 0
	if got := strings.Join(s.segments(), " | "); !strings.Contains(got, "KV 1 MiB/256 MiB") || strings.Contains(got, "state") {
		t.Errorf("dense gauge: %q", got)
	}

	info := &engine.ModelInfo{ContextSize: 4096, KVAllocBytes: 256 * mib, RecurrentBytes: 150 * mib, SnapshotBytes: 600 * mib}
	idle := statusLine{info: info}
	if got := strings.Join(idle.segments(), " | "); !strings.Contains(got, "KV+state 150 MiB/1006 MiB") {
		t.Errorf("idle recurrent gauge: %q", got)
	}
	st := DefaultStyles()
	p := backendPanel{info: info}
	if v := plain(p.View(&st, 80)); !strings.Contains(v, "recurrent 150 MiB") || !strings.Contains(v, "snapshots ≤ 600 MiB") {
		t.Errorf("backend panel lacks the recurrent state:\n%s", v)
	}
}
