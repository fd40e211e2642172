package shaders

import (
	"errors"
	"strings"
	"testing"
)

func TestPreprocess(t *testing.T) {
	src := "a\n//#if X\nb\n//#else\nc\n//#endif\nd\n"
	cases := []struct {
		defs map[string]Const
		want string
	}{
		{map[string]Const{"X": Flag(true)}, "a\nb\nd\n"},
		{map[string]Const{"X": Flag(false)}, "a\nc\nd\n"},
		{map[string]Const{}, "a\nc\nd\n"},
		{map[string]Const{"X": U32(0)}, "a\nc\nd\n"},
		{map[string]Const{"X": U32(3)}, "a\nb\nd\n"},
	}
	for _, c := range cases {
		got, err := preprocess(src, c.defs)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimRight(got, "\n") != strings.TrimRight(c.want, "\n") {
			t.Errorf("defs %v: got %q want %q", c.defs, got, c.want)
		}
	}
	// Nested blocks: inner lines need every enclosing branch taken.
	nested := "a\n//#if X\nb\n//#if Y\nc\n//#else\nd\n//#endif\ne\n//#else\nf\n//#if Y\ng\n//#endif\n//#endif\nh\n"
	for _, c := range []struct {
		x, y bool
		want string
	}{
		{true, true, "a\nb\nc\ne\nh"},
		{true, false, "a\nb\nd\ne\nh"},
		{false, true, "a\nf\ng\nh"},
		{false, false, "a\nf\nh"},
	} {
		got, err := preprocess(nested, map[string]Const{"X": Flag(c.x), "Y": Flag(c.y)})
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimRight(got, "\n") != c.want {
			t.Errorf("nested X=%v Y=%v: got %q want %q", c.x, c.y, got, c.want)
		}
	}
	for _, bad := range []string{"//#if A\n//#if B\n//#endif", "//#if A\n//#else\n//#else\n//#endif", "//#else", "//#endif", "//#if A\nx"} {
		if _, err := preprocess(bad, nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSource(t *testing.T) {
	src, err := Source("argmax", map[string]Const{"COLS": U32(10), "XROWS": U32(2), "EPS": F32(1e-6), "ONE": F32(1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"const COLS: u32 = 10u;", "const XROWS: u32 = 2u;", "const EPS: f32 = 1e-06;", "const ONE: f32 = 1.0;", "fn main("} {
		if !strings.Contains(src, want) {
			t.Errorf("source lacks %q", want)
		}
	}
	if _, err := Source("nope", nil); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown shader: got %v", err)
	}
}

func TestIncludeFragments(t *testing.T) {
	got, err := includeFragments([]byte("a\n//#include q1_vec_io\nb"))
	if err != nil {
		t.Fatal(err)
	}
	frag, _ := files.ReadFile("q1_vec_io.wgsli")
	if want := "a\n" + string(frag) + "b"; string(got) != want {
		t.Errorf("include: got %d bytes, want %d", len(got), len(want))
	}
	if _, err := includeFragments([]byte("//#include nope")); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown fragment: got %v", err)
	}
	// Both matvecs get the shared store and x load.
	for _, k := range []string{"q1_matvec", "q1_popc"} {
		src, err := Source(k, map[string]Const{"OUT2": Flag(true)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(src, "fn store(row: u32, v: f32)") || !strings.Contains(src, "fn xin(") {
			t.Errorf("%s lacks the q1_vec_io fragment", k)
		}
	}
}
