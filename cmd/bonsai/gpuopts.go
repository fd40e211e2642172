package main

import (
	"os"

	"github.com/bonsai-chat/bonsai/infer"
)

// gpuOptions are the GPU backend's settings from the environment; the
// backend reads none itself. BONSAI_GPU_SOFTWARE=1 admits software adapters
// (lavapipe, llvmpipe) without naming one; BONSAI_GPU_MATVEC,
// BONSAI_GPU_FUSE and BONSAI_GPU_ATTN pick decode kernels, fusions and
// attention kernels, BONSAI_GPU_GEMM the prompt GEMM, for A/B measurements (the
// gpu package lists the names; a wrong one fails the load);
// BONSAI_GPU_REPEAT repeats kernels' dispatches to time them in the real pass;
// BONSAI_GPU_LOG=debug brings back wgpu-native's log.
func gpuOptions() infer.GPUOptions {
	return gpuOptionsFrom(os.Getenv)
}

func gpuOptionsFrom(getenv func(string) string) infer.GPUOptions {
	return infer.GPUOptions{
		AllowSoftware: getenv("BONSAI_GPU_SOFTWARE") == "1",
		MatVec:        getenv("BONSAI_GPU_MATVEC"),
		Fuse:          getenv("BONSAI_GPU_FUSE"),
		Attn:          getenv("BONSAI_GPU_ATTN"),
		Gemm:          getenv("BONSAI_GPU_GEMM"),
		Repeat:        getenv("BONSAI_GPU_REPEAT"),
		Debug:         getenv("BONSAI_GPU_LOG") == "debug",
	}
}
