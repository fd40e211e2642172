package main

import (
	"os"

	"github.com/bonsai-chat/bonsai/infer"
)

// gpuOptions are the GPU backend's settings from the environment; the
// backend reads none itself. BONSAI_GPU_SOFTWARE=1 admits software adapters
// (lavapipe, llvmpipe) without naming one; BONSAI_GPU_LOG=debug brings back
// wgpu-native's log. The kernels are the backend's own choice.
func gpuOptions() infer.GPUOptions {
	return gpuOptionsFrom(os.Getenv)
}

func gpuOptionsFrom(getenv func(string) string) infer.GPUOptions {
	return infer.GPUOptions{
		AllowSoftware: getenv("BONSAI_GPU_SOFTWARE") == "1",
		Debug:         getenv("BONSAI_GPU_LOG") == "debug",
	}
}
