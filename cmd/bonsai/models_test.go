package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/hub"
)

// The "cannot run" mark follows the architecture registry: registering the
// architecture removes it.
func TestUnrunnableMark(t *testing.T) {
	if m := unrunnableMark("qwen3"); m != "" {
		t.Errorf("qwen3 marked %q", m)
	}
	const arch = "test-arch-not-yet"
	if m := unrunnableMark(arch); !strings.Contains(m, "cannot run") {
		t.Errorf("unregistered architecture marked %q", m)
	}
	infer.RegisterArch(infer.Architecture{Name: arch})
	if m := unrunnableMark(arch); m != "" {
		t.Errorf("registered architecture still marked %q", m)
	}
	var out bytes.Buffer
	if err := runModels([]string{"--dir", t.TempDir()}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, m := range hub.Registry {
		_, err := infer.LookupArch(m.Arch())
		line := ""
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), m.Name+" ") {
				line = l
			}
		}
		if marked := strings.Contains(line, "cannot run"); marked != (err != nil) {
			t.Errorf("%s (%s): line %q, runnable %v", m.Name, m.Arch(), line, err == nil)
		}
	}
}
