package tui

import (
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
)

func TestBackendPanelRows(t *testing.T) {
	st := DefaultStyles()
	cpu := fakeengine.DefaultInfo
	cpu.Details = []string{"2 worker threads",
		"weights: 231 MiB in the file mapping, 0 MiB repacked for the SIMD kernels (0 MiB of file pages released)"}
	gpu := fakeengine.DefaultInfo
	gpu.Backend, gpu.Adapter, gpu.SIMD = "gpu", "llvmpipe (LLVM 19.1.7, 256 bits) (Vulkan, Mesa)", ""
	gpu.Details = []string{"max storage binding 2048 MiB, max buffer 2048 MiB",
		"workgroup storage 32 KiB, 1024 invocations", "timestamp queries: true"}
	for _, tc := range []struct {
		name         string
		info         engine.ModelInfo
		want, unwant []string
	}{
		{"cpu", cpu, []string{"cpu      2 worker threads · avx2", "231 MiB (file 248 MiB); 231 MiB in the file"}, []string{"threads\n"}},
		{"gpu", gpu, []string{"slower than the CPU", "max storage binding 2048 MiB", "timestamp queries: true"}, []string{"cpu      ", "worker threads"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := backendPanel{info: &tc.info}
			v := plain(p.View(&st, 60))
			for _, w := range tc.want {
				if !strings.Contains(v, w) {
					t.Errorf("panel lacks %q:\n%s", w, v)
				}
			}
			for _, u := range tc.unwant {
				if strings.Contains(v, u) {
					t.Errorf("panel has %q:\n%s", u, v)
				}
			}
			if n := strings.Count(v, "│ weights"); n != 1 {
				t.Errorf("%d weights rows, want 1:\n%s", n, v)
			}
		})
	}
}
