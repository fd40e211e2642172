package jinja

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oracleDivergences are goldens where @huggingface/jinja departs from
// Python's Jinja2, which transformers (and so the template's authors) use.
var oracleDivergences = map[string]string{
	// Jinja2 iterates an undefined `tools` as empty; the JS engine raises.
	"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.conversation": "undefined iterates as empty",
	"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.no_system":    "undefined iterates as empty",
	"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.thinking":     "undefined iterates as empty",
	// Jinja2 trims an undefined (a parameter without a description) to "";
	// the JS engine raises.
	"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.tools": "undefined trims to the empty string",
}

// Every chat template in ../testdata/templates renders every context in
// testdata/contexts to what @huggingface/jinja renders (testdata/golden,
// written by testdata/golden.mjs), or raises where it raises.
func TestGoldenTemplates(t *testing.T) {
	tpls, err := filepath.Glob("../testdata/templates/*.jinja")
	if err != nil || len(tpls) < 10 {
		t.Fatalf("templates: %v (%d)", err, len(tpls))
	}
	ctxs, err := filepath.Glob("testdata/contexts/*.json")
	if err != nil || len(ctxs) < 4 {
		t.Fatalf("contexts: %v (%d)", err, len(ctxs))
	}
	for _, tp := range tpls {
		src, err := os.ReadFile(tp)
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := Parse(string(src))
		if err != nil {
			t.Errorf("%s: %v", tp, err)
			continue
		}
		for _, cp := range ctxs {
			name := strings.TrimSuffix(filepath.Base(tp), ".jinja") + "." + strings.TrimSuffix(filepath.Base(cp), ".json")
			t.Run(name, func(t *testing.T) {
				if why, ok := oracleDivergences[name]; ok {
					t.Skip(why)
				}
				raw, err := os.ReadFile(cp)
				if err != nil {
					t.Fatal(err)
				}
				ctx, err := FromJSON(raw, false)
				if err != nil {
					t.Fatal(err)
				}
				now := func() time.Time { return time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC) }
				got, rerr := tpl.RenderValues(ctx.(*Dict), Options{Now: now})
				base := filepath.Join("testdata/golden", name)
				if want, err := os.ReadFile(base + ".err"); err == nil {
					if !errors.Is(rerr, ErrRaised) || !strings.Contains(rerr.Error(), strings.TrimSpace(string(want))) {
						t.Errorf("got error %v, output %q; want it to raise %q", rerr, got.S, strings.TrimSpace(string(want)))
					}
					return
				}
				want, err := os.ReadFile(base + ".txt")
				if err != nil {
					t.Fatal(err)
				}
				if rerr != nil {
					t.Fatal(rerr)
				}
				if got.S != string(want) {
					t.Errorf("got\n%s\nwant\n%s", got.S, want)
				}
			})
		}
	}
}

// BenchmarkRenderLlama31 renders Llama 3.1's template (tools and all) for
// a six-turn conversation with a tool call.
func BenchmarkRenderLlama31(b *testing.B) {
	src, err := os.ReadFile("../testdata/templates/meta-llama-Llama-3.1-8B-Instruct.jinja")
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/contexts/tools.json")
	if err != nil {
		b.Fatal(err)
	}
	tpl, err := Parse(string(src))
	if err != nil {
		b.Fatal(err)
	}
	ctx, err := FromJSON(raw, true)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := tpl.RenderValues(ctx.(*Dict), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
