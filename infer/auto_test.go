package infer_test

import (
	"errors"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/cpu"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

// picky is a backend that loads anything but cannot run attention, as a GPU
// backend without a kernel for some shape.
type picky struct{ *cpu.Backend }

func (p picky) Name() string { return "gpu" }
func (p picky) Attention(dst, q infer.Tensor, layer int, a infer.Attn) {
	p.Backend.Attention(dst, q, -1, a) // an invalid layer: the pass fails
}

// "auto" tries the GPU, finds at load time that it cannot run the model,
// and settles on the CPU; asking for the GPU by name reports the failure.
func TestAutoFallsBackWhenTheGPUCannotRunTheModel(t *testing.T) {
	var asked []infer.BackendOptions
	infer.RegisterBackend("gpu", func(o infer.BackendOptions) (infer.Backend, error) {
		asked = append(asked, o)
		b, err := cpu.New(o)
		return picky{b}, err
	})
	f := open(t, tinymodel.Small(gguf.Q8_0))
	m, err := infer.Load(f, infer.Options{Backend: "auto", Context: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if name := m.Backend().Name(); name != "cpu" {
		t.Errorf("auto chose %q, want cpu", name)
	}
	// It says why: the GPU's own error.
	if !errors.Is(m.Fallback, infer.ErrBadShape) {
		t.Errorf("Fallback = %v, want the GPU's trial pass error", m.Fallback)
	}
	if len(asked) != 1 || !asked[0].Auto {
		t.Errorf("the GPU factory was asked %+v, want once with Auto set", asked)
	}
	if _, err := infer.Load(f, infer.Options{Backend: "gpu", Context: 16}); !errors.Is(err, infer.ErrBadShape) {
		t.Errorf("Load on the picky GPU = %v, want its trial pass's ErrBadShape", err)
	}
}
