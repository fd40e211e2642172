package main

import (
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
)

func TestGPUOptionsFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want infer.GPUOptions
	}{
		{nil, infer.GPUOptions{}},
		{map[string]string{"BONSAI_GPU_SOFTWARE": "1"}, infer.GPUOptions{AllowSoftware: true}},
		{map[string]string{"BONSAI_GPU_SOFTWARE": "yes"}, infer.GPUOptions{}},
		// the kernel knobs are gone: their variables change nothing
		{map[string]string{"BONSAI_GPU_MATVEC": "popc", "BONSAI_GPU_FUSE": "off", "BONSAI_GPU_ATTN": "split", "BONSAI_GPU_GEMM": "r2x2", "BONSAI_GPU_REPEAT": "q1_xq=2"}, infer.GPUOptions{}},
		{map[string]string{"BONSAI_GPU_LOG": "debug"}, infer.GPUOptions{Debug: true}},
	} {
		if got := gpuOptionsFrom(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: %+v, want %+v", tc.env, got, tc.want)
		}
	}
}
