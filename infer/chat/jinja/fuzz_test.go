package jinja

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRender: any source either fails to parse or renders, within its
// limits, to output or an *Error — never a panic (which Render would turn
// into an "internal error").
func FuzzRender(f *testing.F) {
	paths, _ := filepath.Glob("../testdata/templates/*.jinja")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range []string{
		"{{ x }}", "{% for a, b in d.items() if a %}{{ loop.index }}{% endfor %}", "{%- set ns = namespace(a=1) -%}{% set ns.a = ns.a * 2 %}",
		"{{ 'ab'[::-1] ~ [1,2][1:] | string }}", "{% macro m(a, b=2) %}{{ caller() if caller is defined }}{% endmacro %}{% call m(1) %}x{% endcall %}",
		"{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('\\n') | tojson(indent=2) }}",
		"{% raw %}{{{% endraw %}", "{{ {'a': {'b': 1}} }}", "{{ 1 if x else 2 }}{{ -1 // 0 }}",
	} {
		f.Add(s)
	}
	vars := `{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u <|im_end|>"}, {"role": "assistant", "content": "a", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}],
		"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "d": {"k": [1, 2.5, null]}}`
	ctx, err := FromJSON([]byte(vars), true)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Parse(src)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrLimit) {
				t.Fatalf("parse error of the wrong kind: %v", err)
			}
			if strings.Contains(err.Error(), "internal error") {
				t.Fatal(err)
			}
			return
		}
		out, err := tpl.RenderValues(ctx.(*Dict), Options{Limits: Limits{Steps: 200000, Output: 1 << 16, Depth: 40}})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || strings.Contains(err.Error(), "internal error") {
				t.Fatal(err)
			}
			return
		}
		if len(out.S) > 1<<16 {
			t.Fatalf("output of %d bytes passed the cap", len(out.S))
		}
		for _, p := range out.plain {
			if p.lo >= p.hi || p.hi > len(out.S) {
				t.Fatalf("bad data span %v in %d bytes", p, len(out.S))
			}
		}
	})
}
