package infer_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// Sizes that would crash the process in an allocation (Go's out-of-memory
// is fatal, a negative make panics) are refused before anything is
// allocated, with what they would need.
func TestLoadRefusesSizesThatCannotWork(t *testing.T) {
	cfg := tinymodel.Small(gguf.Q8_0) // trained on cfg.Context tokens
	f := open(t, cfg)
	for _, tc := range []struct {
		name string
		opts infer.Options
		want []string
	}{
		{"beyond any machine", infer.Options{Backend: "cpu", Context: 100000000},
			[]string{"100000000 tokens", fmt.Sprintf("trained on %d", cfg.Context), "GiB"}},
		{"max int context", infer.Options{Backend: "cpu", Context: math.MaxInt},
			[]string{fmt.Sprint(math.MaxInt), "trained on"}},
		{"absurd threads", infer.Options{Backend: "cpu", Context: 16, Threads: 9999999999999},
			[]string{"9999999999999 CPU threads", fmt.Sprintf("has %d CPUs", runtime.NumCPU())}},
		{"auto, absurd threads", infer.Options{Backend: "auto", Context: 16, Threads: 1 << 40},
			[]string{"CPU threads"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := infer.Load(f, tc.opts)
			if err == nil {
				m.Close()
				t.Fatal("Load succeeded")
			}
			if !errors.Is(err, infer.ErrTooLarge) {
				t.Errorf("err = %v, want ErrTooLarge", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to mention %q", err, w)
				}
			}
		})
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: cfg.Context, Threads: 2})
	if err != nil {
		t.Fatalf("the trained context itself: %v", err)
	}
	if len(m.Notes) != 0 {
		t.Errorf("the trained context: notes %q", m.Notes)
	}
	m.Close()
	// Beyond the training is the user's choice: loaded, and said.
	m, err = infer.Load(f, infer.Options{Backend: "cpu", Context: 2 * cfg.Context, Threads: 2})
	if err != nil {
		t.Fatalf("twice the trained context: %v", err)
	}
	defer m.Close()
	if len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "trained on") {
		t.Errorf("twice the trained context: notes %q, want one saying it is beyond the training", m.Notes)
	}
}

// errGPUMemory stands for the GPU backend's clean out-of-memory error.
var errGPUMemory = errors.New("not enough GPU memory")

// A load the machine's RAM cannot hold is refused with how much it needs
// and what would fit; under "auto", the GPU's own reason is kept beside it.
func TestLoadChecksHostMemory(t *testing.T) {
	cfg := tinymodel.Small(gguf.Q8_0)
	f := open(t, cfg)
	hp, err := infer.ReadHyperparams(f, "qwen3")
	if err != nil {
		t.Fatal(err)
	}
	need := infer.HostBytes(hp, cfg.Context, min(infer.DefaultBatch, cfg.Context), 2)
	restore := infer.SetHostMemory(int64(need)-1, true)
	defer restore()

	_, err = infer.Load(f, infer.Options{Backend: "cpu", Context: cfg.Context, Threads: 2})
	if !errors.Is(err, infer.ErrTooLarge) || !strings.Contains(err.Error(), "needs "+infer.FormatBytes(need)) ||
		!strings.Contains(err.Error(), "fits") {
		t.Errorf("cpu with too little memory: %v", err)
	}

	infer.RegisterBackend("gpu", func(infer.BackendOptions) (infer.Backend, error) {
		return nil, fmt.Errorf("KV cache: %w", errGPUMemory)
	})
	_, err = infer.Load(f, infer.Options{Backend: "auto", Context: cfg.Context, Threads: 2})
	if !errors.Is(err, errGPUMemory) || !errors.Is(err, infer.ErrTooLarge) {
		t.Errorf("auto with neither fitting = %v, want both the GPU's and the CPU's reason", err)
	}

	// Half the context fits: the check is a bound, not a refusal of all.
	restore()
	defer infer.SetHostMemory(int64(infer.HostBytes(hp, cfg.Context/2, min(infer.DefaultBatch, cfg.Context/2), 2))+1, true)()
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: cfg.Context / 2, Threads: 2})
	if err != nil {
		t.Fatalf("a context that fits: %v", err)
	}
	m.Close()
}

func TestParseMemAvailable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"MemTotal:  100 kB\nMemFree: 5 kB\nMemAvailable:   23971548 kB\n", 23971548 * 1024, true},
		{"MemTotal:  100 kB\n", 0, false},
		{"MemAvailable: lots kB\n", 0, false},
		{"MemAvailable: 99999999999999999 kB\n", 0, false},
	} {
		got, ok := infer.ParseMemAvailable([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parse(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    float64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {12 << 20, "12.0 MiB"},
		{3072 * float64(math.MaxInt64), "24.0 ZiB"}, {1e30, "827180.6 YiB"},
	} {
		if got := infer.FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%g) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// A model whose weights or norms hold NaN or Inf, or whose rms epsilon is
// NaN, computes garbage silently; the load-time trial pass catches it.
func TestLoadRefusesNonFiniteModels(t *testing.T) {
	poison := func(name string, v float32) func(*gguf.File) {
		return func(f *gguf.File) {
			ti, ok := f.Tensor(name)
			if !ok || ti.Type != gguf.F32 {
				t.Fatalf("no f32 tensor %s", name)
			}
			binary.LittleEndian.PutUint32(f.Data(ti)[4*3:], math.Float32bits(v))
		}
	}
	for _, tc := range []struct {
		name   string
		extra  map[string]any
		damage func(*gguf.File)
		want   string
	}{
		{"NaN in the output norm", nil, poison("output_norm.weight", float32(math.NaN())), "weights or norms"},
		{"Inf in a layer norm", nil, poison("blk.0.attn_norm.weight", float32(math.Inf(1))), "weights or norms"},
		{"NaN rms epsilon", map[string]any{"qwen3.attention.layer_norm_rms_epsilon": float32(math.NaN())}, nil, "rms epsilon is NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tinymodel.Small(gguf.F32)
			cfg.Extra = tc.extra
			f := open(t, cfg)
			if tc.damage != nil {
				tc.damage(f)
			}
			m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 16, Threads: 2})
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			if !errors.Is(err, infer.ErrNonFinite) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrNonFinite saying %q", err, tc.want)
			}
		})
	}
	if m, err := infer.Load(open(t, tinymodel.Small(gguf.F32)), infer.Options{Backend: "cpu", Context: 16, Threads: 2}); err != nil {
		t.Errorf("the undamaged model: %v", err)
	} else {
		m.Close()
	}
}

// A norm weight of another type than f32 is named as such, not reported as
// a bad tensor shape from the middle of the trial pass.
func TestLoadNamesANormOfTheWrongType(t *testing.T) {
	src := open(t, tinymodel.Small(gguf.F32))
	w := gguf.NewWriter()
	for _, k := range src.KV.Keys() {
		v, _ := src.KV.Get(k)
		w.Set(k, v.Any())
	}
	for i := range src.Tensors {
		ti := &src.Tensors[i]
		typ, data := ti.Type, src.Data(ti)
		if ti.Name == "output_norm.weight" {
			vals := make([]float32, ti.Elements())
			for j := range vals {
				vals[j] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:]))
			}
			rb, _ := gguf.F16.RowBytes(ti.Shape[0])
			data = make([]byte, rb)
			if err := quant.QuantizeRow(gguf.F16, vals, data); err != nil {
				t.Fatal(err)
			}
			typ = gguf.F16
		}
		if err := w.AddTensor(ti.Name, typ, ti.Shape, data); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	_, err = infer.Load(f, infer.Options{Backend: "cpu", Context: 16, Threads: 2})
	if !errors.Is(err, infer.ErrUnsupportedType) || errors.Is(err, infer.ErrBadShape) || !strings.Contains(err.Error(), "output_norm.weight is f16") {
		t.Errorf("err = %v, want ErrUnsupportedType naming output_norm.weight's type", err)
	}
}
