//go:build cgo && !nogpu

package main

import (
	"bytes"
	"errors"
	"testing"
)

// The GPU picks its kernels itself: `bonsai gpu` has no flags to choose
// them, and naming one is a usage error, not a silent default.
func TestGPUHasNoKernelFlags(t *testing.T) {
	for _, args := range [][]string{{"--matvec", "popc"}, {"--gemm", "lut4s"}, {"--attn", "split"}, {"--fuse", "off"}, {"--repeat", "q1_xq=2"}} {
		var stdout, stderr bytes.Buffer
		if err := runGPU(args, &stdout, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("bonsai gpu %q: %v, want a usage error", args, err)
		}
	}
}
