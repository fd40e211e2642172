package engine

import (
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
)

// The adapter setting reaches the backend factory (it used to stop at the
// configuration, the GPU backend reading the environment instead).
func TestAdapterReachesTheBackend(t *testing.T) {
	var got infer.BackendOptions
	infer.RegisterBackend("adapter-probe", func(opts infer.BackendOptions) (infer.Backend, error) {
		got = opts
		return infer.NewBackend("cpu", opts)
	})
	e := New(Options{File: testFile(t), Backend: "adapter-probe", Adapter: "NVIDIA H200", Threads: 1, Context: 64})
	t.Cleanup(e.Close)
	waitFor[Loaded](t, e)
	if got.Adapter != "NVIDIA H200" {
		t.Errorf("the backend got adapter %q, want the one configured", got.Adapter)
	}
}
