package jinja

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func render(t *testing.T, src, vars string) (string, error) {
	t.Helper()
	tpl, err := Parse(src)
	if err != nil {
		return "", err
	}
	if vars == "" {
		vars = "{}"
	}
	ctx, err := FromJSON([]byte(vars), false)
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Date(2026, 3, 5, 14, 7, 9, 0, time.UTC) }
	out, err := tpl.RenderValues(ctx.(*Dict), Options{Now: now, Limits: Limits{Steps: 100000, Output: 1 << 16, Depth: 50}})
	return out.S, err
}

func TestRender(t *testing.T) {
	tests := []struct {
		name, src, vars, want string
	}{
		{"text", "hello", "", "hello"},
		{"output", "{{ a }}-{{ b }}", `{"a": "x", "b": 2}`, "x-2"},
		{"comment", "a{# gone #}b", "", "ab"},
		{"dash trims both sides", "a  {{- 'b' -}}  \n c", "", "abc"},
		{"trim_blocks", "{% if true %}\nx\n{% endif %}\ny", "", "x\ny"},
		{"lstrip_blocks", "a\n    {% if true %}x{% endif %}\n", "", "a\nx"},
		{"plus keeps trim_blocks off", "{% if true +%}\nx{% endif %}", "", "\nx"},
		{"plus keeps lstrip off", "a\n  {%+ if true %}x{% endif %}", "", "a\n  x"},
		{"no lstrip for output", "a\n  {{ 'x' }}", "", "a\n  x"},
		{"if elif else", "{% for n in [1,2,3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %} {% endfor %}", "", "one two many "},
		{"loop vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }};{% endfor %}", "",
			"10TrueFalse33;21FalseFalse32;32FalseTrue31;"},
		{"loop filter", "{% for x in xs if x.keep %}{{ x.n }}{{ loop.length }}{% endfor %}", `{"xs": [{"n": 1, "keep": true}, {"n": 2}, {"n": 3, "keep": true}]}`, "1232"},
		{"loop else", "{% for x in [] %}x{% else %}empty{% endfor %}", "", "empty"},
		{"loop cycle prev next", "{% for x in [1,2,3] %}{{ loop.cycle('a','b') }}{{ loop.previtem }}{{ loop.nextitem }}|{% endfor %}", "", "a2|b13|a2|"},
		{"break continue", "{% for x in range(10) %}{% if x == 1 %}{% continue %}{% endif %}{% if x > 3 %}{% break %}{% endif %}{{ x }}{% endfor %}", "", "023"},
		{"unpack items", "{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", `{"d": {"b": 1, "a": 2}}`, "b=1,a=2,"},
		{"set does not leak from loop", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "", "1"},
		{"namespace", "{% set ns = namespace(n=0, s='') %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "", "6"},
		{"namespace empty then set", "{% set ns = namespace() %}{% set ns.index = 5 %}{{ ns.index }}", "", "5"},
		{"set block", "{% set x %}a{{ 1 + 1 }}{% endset %}[{{ x }}]", "", "[a2]"},
		{"tuple set", "{% set a, b = 1, 2 %}{{ b }}{{ a }}", "", "21"},
		{"macro", "{% macro greet(name, p='Hi') %}{{ p }} {{ name }}{% endmacro %}{{ greet('Bo') }}/{{ greet('Al', p='Yo') }}", "", "Hi Bo/Yo Al"},
		{"macro call block", "{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}in{% endcall %}", "", "[in]"},
		{"filter block", "{% filter upper %}abc{% endfilter %}", "", "ABC"},
		{"sign before filter", "{{ -3 | abs }}{{ -x | string }}", `{"x": 2}`, "3-2"},
		{"arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }}", "", "3 -4 1 2 3.5 1024 7 9"},
		{"float format", "{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 3 * 1.5 }}", "", "1.0 0.30000000000000004 4.5"},
		{"concat tilde", "{{ 'a' ~ 1 ~ none ~ true }}", "", "a1NoneTrue"},
		{"comparisons", "{{ 1 < 2 }}{{ 'a' < 'b' }}{{ 2 >= 3 }}{{ 1 == 1.0 }}{{ 'a' != 'a' }}", "", "TrueTrueFalseTrueFalse"},
		{"and or return operands", "{{ '' or 'x' }}{{ 'a' and 'b' }}{{ none or 0 }}", "", "xb0"},
		{"not in", "{{ 'x' in 'xyz' }}{{ 3 not in [1,2] }}{{ 'k' in {'k': 1} }}", "", "TrueTrueTrue"},
		{"conditional", "{{ 'y' if x else 'n' }}{{ 'y' if not x }}", `{"x": false}`, "ny"},
		{"undefined prints empty", "[{{ nope }}][{{ nope.deeper.still }}][{{ nope['k'] }}]", "", "[][][]"},
		{"defined tests", "{{ a is defined }}{{ a.b is defined }}{{ z is undefined }}{{ a.c is none }}", `{"a": {"c": null}}`, "TrueFalseTrueTrue"},
		{"type tests", "{{ 'a' is string }}{{ 1 is number }}{{ 1.5 is number }}{{ d is mapping }}{{ l is iterable }}{{ l is sequence }}{{ 'a' is mapping }}", `{"d": {}, "l": []}`, "TrueTrueTrueTrueTrueTrueFalse"},
		{"true false tests", "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ x is not none }}", `{"x": 1}`, "TrueFalseTrueFalseTrue"},
		{"equalto and in tests", "{{ 2 is equalto 2 }}{{ 2 is eq(3) }}{{ 'a' is in ['a'] }}{{ 4 is divisibleby 2 }}{{ 3 is odd }}", "", "TrueFalseTrueTrueTrue"},
		{"string methods", "{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a-b-c'.split('-', 1) }}", "",
			"x|a|x|x|['a', 'b', '', 'c']|['a', 'b']|['a', 'b-c']"},
		{"more string methods", "{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x', 'lo')) }}{{ 'aBc'.upper() }}{{ 'aBc'.lower() }}{{ 'a.b.c'.replace('.', '/') }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}{{ 'abc'.find('c') }}", "",
			"TrueTrueABCabca/b/cHello WorldHello2"},
		{"string index and slice", "{{ s[0] }}{{ s[-1] }}{{ s[1:3] }}{{ s[::-1] }}{{ s[:-2] }}", `{"s": "héllo"}`, "hoélolléhhél"},
		{"list slice", "{{ l[1:] }}{{ l[:-1] }}{{ l[::2] }}{{ l[-1] }}", `{"l": [1,2,3]}`, "[2, 3][1, 2][1, 3]3"},
		{"dict methods", "{{ d.keys() | list }}{{ d.values() | list }}{{ d.get('a') }}{{ d.get('z', 'dflt') }}{{ d.get('z') }}", `{"d": {"a": 1, "b": 2}}`, "['a', 'b'][1, 2]1dfltNone"},
		{"list append", "{% set l = [] %}{% for i in range(3) %}{% do l.append(i) %}{{ l.append(i * 10) or '' }}{% endfor %}{{ l }}", "", "[0, 0, 1, 10, 2, 20]"},
		{"dict literal and attr", "{% set d = {'a': {'b': [1, 2]}} %}{{ d.a.b[1] }}{{ d['a']['b'] | length }}", "", "22"},
		{"filters text", "{{ '  x ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ 'ab cd' | title }}|{{ 'ab' | capitalize }}|{{ 'aXbX' | replace('X', '-') }}|{{ '<b>x</b> y' | striptags }}", "",
			"x|AB|ab|Ab Cd|Ab|a-b-|x y"},
		{"filters lists", "{{ l | length }}{{ l | first }}{{ l | last }}{{ l | join(',') }}{{ l | reverse | list }}{{ l | sort | list }}{{ [1,1,2] | unique | list }}{{ l | sum }}{{ l | min }}{{ l | max }}", `{"l": [3,1,2]}`,
			"332" + "3,1,2[2, 1, 3][1, 2, 3][1, 2]613"},
		{"default", "{{ x | default('d') }}{{ '' | default('d') }}{{ '' | default('d', true) }}{{ y | d('e') }}", `{"y": null}`, "ddNone"},
		{"int float round", "{{ '42' | int }}{{ 'x' | int }}{{ 3.7 | int }}{{ 2 | float }}{{ 2.567 | round(2) }}{{ 2.5 | round }}{{ 2.1 | round(0, 'ceil') }}", "", "42032.02.573.03.0"},
		{"string filter and safe", "{{ 12 | string }}{{ [1] | string }}{{ 'x' | safe }}", "", "12[1]x"},
		{"items filter", "{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}", `{"d": {"x": 1}}`, "x1"},
		{"selectattr rejectattr map", "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | join }}{{ ms | rejectattr('role', 'equalto', 'user') | map(attribute='c') | list }}{{ ms | selectattr('c') | list | length }}",
			`{"ms": [{"role": "user", "c": "a"}, {"role": "assistant", "c": "b"}, {"role": "user", "c": ""}]}`, "a['b']2"},
		{"map filter name", "{{ ['a', 'b'] | map('upper') | join('-') }}", "", "A-B"},
		{"select test", "{{ [1, 2, 3, 4] | select('odd') | list }}{{ [1, none] | reject('none') | list }}", "", "[1, 3][1]"},
		{"tojson", "{{ d | tojson }}", `{"d": {"b": [1, 2.5, "x\"y", null, true], "a": {}}}`, `{"b": [1, 2.5, "x\"y", null, true], "a": {}}`},
		{"tojson indent", "{{ d | tojson(indent=2) }}", `{"d": {"a": [1], "é": "ü"}}`, "{\n  \"a\": [\n    1\n  ],\n  \"é\": \"ü\"\n}"},
		{"tojson separators", "{{ {'a': [1, 2]} | tojson(separators=(',', ':')) }}", "", `{"a":[1,2]}`},
		{"title method and filter", "{{ \"they're 2nd-best\".title() }}|{{ \"they're 2nd-best (ok)\" | title }}", "", "They'Re 2Nd-Best|They're 2nd-Best (Ok)"},
		{"tojson sort_keys", "{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}", "", `{"a": 2, "b": 1}`},
		{"indent filter", "{{ 'a\nb\n\nc' | indent(2) }}", "", "a\n  b\n\n  c"},
		{"integer keys", "{% set d = {4096: 512, 1024: 256} %}{% for k, v in d | dictsort %}{{ k + 1 }}:{{ v }},{% endfor %}{{ d[1024] }}", "", "1025:256,4097:512,256"},
		{"dictsort", "{{ {'b': 1, 'a': 2} | dictsort }}", "", "[['a', 2], ['b', 1]]"},
		{"range", "{{ range(3) | list }}{{ range(1, 7, 2) | list }}{{ range(3, 0, -1) | list }}", "", "[0, 1, 2][1, 3, 5][3, 2, 1]"},
		{"strftime_now", "{{ strftime_now('%d %b %Y %H:%M') }}|{{ strftime_now('%-d %B') }}", "", "05 Mar 2026 14:07|5 March"},
		{"string format", "{{ '%s is %d' % ('x', 3) }}{{ 'a{}b{}'.format(1, 2) }}", "", "x is 3a1b2"},
		{"raw", "{% raw %}{{ not rendered }}{% endraw %}", "", "{{ not rendered }}"},
		{"whitespace in tags and multiline", "{%-\n  if true\n-%}\n  x\n{%- endif %}", "", "x"},
		{"dict with braces in output", "{{ {'a': {'b': 1}} }}", "", "{'a': {'b': 1}}"},
		{"generation block", "{% generation %}g{% endgeneration %}", "", "g"},
		{"is not defined chain", "{% if tools is not defined or tools is none %}none{% endif %}", "", "none"},
		{"message content index", "{{ messages[0]['content'] }}{{ messages[-1].role }}", `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}`, "hiassistant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := render(t, tt.src, tt.vars)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, src string
		is        error
		at        string // "line:col"
	}{
		{"unclosed tag", "ab\n{{ x", ErrSyntax, "2:1"},
		{"unclosed block", "{% if x %}\nno end", ErrSyntax, "2:7"},
		{"unknown statement", "\n  {% frobnicate %}", ErrSyntax, "2:6"},
		{"bad expression", "{{ 1 + }}", ErrSyntax, "1:8"},
		{"unclosed string", "{{ 'abc }}", ErrSyntax, "1:4"},
		{"raise", "line one\n{{ raise_exception('roles must alternate') }}", ErrRaised, "2:19"},
		{"unknown filter", "{{ x | nosuch }}", ErrRender, "1:8"},
		{"type error", "{{ 'a' + 1 }}", ErrRender, "1:8"},
		{"division by zero", "{{ 1 // 0 }}", ErrRender, "1:6"},
		{"call undefined", "{{ nosuch() }}", ErrRender, "1:10"},
		{"steps", "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", ErrLimit, ""},
		{"output", "{% for i in range(100000) %}xxxxxxxx{% endfor %}", ErrLimit, ""},
		{"string repeat", "{{ 'x' * 100000000 }}", ErrLimit, ""},
		{"range size", "{{ range(1000000000) }}", ErrLimit, ""},
		{"recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", ErrLimit, ""},
		{"parse nesting", strings.Repeat("{% if x %}", 300), ErrLimit, ""},
		{"expression nesting", "{{ " + strings.Repeat("(", 1000) + "1" + strings.Repeat(")", 1000) + " }}", ErrLimit, ""},
		{"break outside loop", "{% break %}", ErrRender, "1:4"},
		{"break in a macro called in a loop", "{% macro m() %}{% break %}{% endmacro %}{% for i in [1] %}{{ m() }}{% endfor %}", ErrRender, "1:19"},
		{"shared big string printed", "{% set s = 'x' * 60000 %}{% set l = [] %}{% for i in range(2000) %}{% do l.append(s) %}{% endfor %}{{ l }}", ErrLimit, ""},
		{"doubling list", "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", ErrLimit, ""},
		{"list holding itself", "{% set l = [] %}{% do l.append(l) %}{% do l.append(l) %}{% for i in range(100000) %}{{ l == l }}{{ l }}{% endfor %}", ErrLimit, ""},
		{"nested sharing", "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{% for i in range(100000) %}{{ ns.l | tojson }}{% endfor %}", ErrLimit, ""},
		{"split many", "{{ (',' * 60000).split(',') | length }}{% for i in range(1000) %}{{ (',' * 60000).split(',') | length }}{% endfor %}", ErrLimit, ""},
		{"indent amplifies", "{{ ('\n' * 60000) | indent(200, true, true) }}", ErrLimit, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.src, "")
			if !errors.Is(err, tt.is) {
				t.Fatalf("got %v, want %v", err, tt.is)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%v is not an *Error", err)
			}
			if tt.at != "" && e.Pos.String() != tt.at {
				t.Errorf("error at %s, want %s: %v", e.Pos, tt.at, err)
			}
		})
	}
}

// Data keeps its mark through the moves templates make: concatenation,
// trim, split, slicing and replace, so a renderer can tell the template's
// markers from the same text in a message.
func TestDataStaysData(t *testing.T) {
	tpl, err := Parse("{{ '<a>' + (m | trim) + '<b>' }}|{{ m.split('|')[1] }}|{{ m[2:4] }}|{{ m.replace('x', '<c>') }}|{{ m | tojson }}")
	if err != nil {
		t.Fatal(err)
	}
	vars := NewDict()
	vars.Set("m", Data("  x|<b>  "))
	out, err := tpl.RenderValues(vars, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range out.Segments() {
		mark := "T"
		if s.Data {
			mark = "D"
		}
		got = append(got, mark+":"+s.Text)
	}
	want := []string{"T:<a>", "D:x|<b>", "T:<b>|", "D:<b>  ", "T:|", "D:x|", "T:|", "D:  ", "T:<c>", "D:|<b>  ", "T:|", `D:"  x|<b>  "`}
	if strings.Join(got, "¶") != strings.Join(want, "¶") {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestRenderFromGo(t *testing.T) {
	tpl, err := Parse("{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}{{ n + 1 }}{{ flags | join(',') }}")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(map[string]any{
		"bos_token": "<s>",
		"messages":  []any{map[string]any{"role": "user", "content": Data("hi")}},
		"n":         41,
		"flags":     []string{"a", "b"},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if out.S != "<s>user:hi;42a,b" {
		t.Errorf("got %q", out.S)
	}
	if segs := out.Segments(); len(segs) != 3 || !segs[1].Data || segs[1].Text != "hi" {
		t.Errorf("segments %+v", segs)
	}
}
