package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/hub"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// The "cannot run" mark follows the architecture registry and the table of
// tensor types: registering the architecture removes it, and a type without
// kernels keeps it.
func TestUnrunnableMark(t *testing.T) {
	if m := unrunnableMark("qwen3", []gguf.Type{gguf.Q1_0, gguf.F32}); m != "" {
		t.Errorf("qwen3 marked %q", m)
	}
	const arch = "test-arch-not-yet"
	if m := unrunnableMark(arch, nil); !strings.Contains(m, "cannot run") {
		t.Errorf("unregistered architecture marked %q", m)
	}
	infer.RegisterArch(infer.Architecture{Name: arch})
	if m := unrunnableMark(arch, nil); m != "" {
		t.Errorf("registered architecture still marked %q", m)
	}
	if m := unrunnableMark("qwen3", []gguf.Type{gguf.TQ1_0, gguf.F32}); !strings.Contains(m, "tq1_0") {
		t.Errorf("a type without kernels marked %q", m)
	}
	var out bytes.Buffer
	if err := runModels([]string{"--dir", t.TempDir()}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, m := range hub.Registry {
		_, err := infer.LookupArch(m.Arch())
		runnable := err == nil
		for _, typ := range m.Types() {
			runnable = runnable && quant.Supported(typ)
		}
		line := ""
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), m.Name+" ") {
				line = l
			}
		}
		if marked := strings.Contains(line, "cannot run"); marked != !runnable {
			t.Errorf("%s (%s %v): line %q, runnable %v", m.Name, m.Arch(), m.Types(), line, runnable)
		}
	}
	// The whole 27B family runs: qwen35 and its types are in this build.
	for _, name := range []string{"bonsai-27b", "ternary-bonsai-27b", "bonsai-2-27b", "bonsai-2-27b-ptq1_0"} {
		m, ok := hub.Lookup(name)
		if !ok {
			t.Fatalf("%s is not in the registry", name)
		}
		if mark := unrunnableMark(m.Arch(), m.Types()); mark != "" {
			t.Errorf("%s marked %q", name, mark)
		}
	}
}

// `bonsai models` says, per registry entry, whether its download is
// checked against a pinned SHA256 or only by size and format.
func TestModelsShowsHashCheck(t *testing.T) {
	saved := hub.Registry
	hub.Registry = append(append([]hub.Model(nil), saved...),
		hub.Model{Name: "pinned-test", File: "p.gguf", Size: 10, SHA256: strings.Repeat("ab", 32), Summary: "a pinned entry"})
	t.Cleanup(func() { hub.Registry = saved })
	var out bytes.Buffer
	if err := runModels([]string{"--dir", t.TempDir()}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		m, ok := hub.Lookup(fields[0])
		if !ok {
			continue
		}
		want := "no sha256"
		if m.SHA256 != "" {
			want = "sha256 pinned"
		}
		if !strings.Contains(line, want) {
			t.Errorf("%s: line %q does not say %q", m.Name, line, want)
		}
	}
	if !strings.Contains(out.String(), "pinned-test") {
		t.Errorf("the pinned entry is not listed:\n%s", out.String())
	}
}

// The built-in model is listed, and --model takes the name it is listed
// (and described by info) under.
func TestBuiltInModelIsNamedAndListed(t *testing.T) {
	isolatedXDG(t)
	out, errOut, code := run(t, "models")
	if code != 0 || !strings.Contains(out, "built in") || !strings.Contains(out, "  bonsai-tiny ") {
		t.Errorf("models (exit %d, %s) does not list the built-in model:\n%s", code, errOut, out)
	}
	for _, name := range []string{"bonsai-tiny", "Bonsai-Tiny"} {
		out, errOut, code := run(t, "run", "--model", name, "--backend", "cpu", "--temp", "0", "--max-tokens", "2", "hi")
		if code != 0 || strings.TrimSpace(out) == "" {
			t.Errorf("run --model %s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
	if out, errOut, code := run(t, "info", "bonsai-tiny"); code != 0 || !strings.Contains(out, "bonsai-tiny") {
		t.Errorf("info bonsai-tiny: exit %d, %s", code, errOut)
	}
	if _, errOut, _ := run(t, "run", "--model", "no-such-model", "hi"); !strings.Contains(errOut, "bonsai-tiny (built in)") {
		t.Errorf("an unknown model's error does not name the built-in one: %q", errOut)
	}
}
