package quant

import (
	"math"
	"testing"
)

// TestGlibcExpfLogf checks GlibcExpf and GlibcLogf against glibc's own
// results (x86-64, FMA variants; bits taken from its expf and logf): the
// first rows are inputs where glibc is not the correctly rounded value, so
// the f64 result rounded to f32 fails them, then ordinary, subnormal and
// special values.
func TestGlibcExpfLogf(t *testing.T) {
	for _, tc := range []struct {
		log  bool
		x, y uint32 // float32 bits
	}{
		{false, 0x3c1d0010, 0x3f813b83}, {false, 0x3c571f1f, 0x3f81b115}, {false, 0x3c6cc03c, 0x3f81dcf1},
		{false, 0x3da0e0e6, 0x3f8a75dc}, {false, 0x3e1219ad, 0x3f93a12d}, {false, 0x3f06e923, 0x3fd8cf92},
		{false, 0xbdc04ba2, 0x3f690e9a}, {false, 0xbdcc0431, 0x3f67ba1f}, {false, 0xbe588bf6, 0x3f4f3458},
		{false, 0xbe6be156, 0x3f4b543e}, {false, 0xbfeaecd4, 0x3e2362fb}, {false, 0xc280f9fd, 0x10f98974},
		{true, 0x3f802c31, 0x3ab0a584}, {true, 0x3f803023, 0x3ac067d5}, {true, 0x3f8038d1, 0x3ae3119f},
		{true, 0x3f803a65, 0x3ae95ec9}, {true, 0x3f8071a1, 0x3b62dd5d}, {true, 0x3f807206, 0x3b63a6aa},
		{true, 0x3f8094be, 0x3b9467d7}, {true, 0x3f809523, 0x3b94cc62}, {true, 0x21c26e0a, 0xc224aee3},
		// softplus's 1 + expf(x) in a qwen35 decode step, where the
		// correctly rounded logf is one ulp above glibc's.
		{true, 0x3f83fcc2, 0x3cfb4b9f},

		{false, 0x3f000000, 0x3fd3094c}, {false, 0xbfa00000, 0x3e92b0c2}, {false, 0x40400000, 0x41a0af2e},
		{false, 0xc1a00000, 0x310da433}, {false, 0x42a00000, 0x792abbce}, {false, 0xc2c80000, 0x0000001b},
		{false, 0x3a83126f, 0x3f8020c9}, {false, 0x42c80000, 0x7f800000}, {false, 0xc2d00000, 0},
		{false, 0, 0x3f800000},
		{true, 0x3f000000, 0xbf317218}, {true, 0x3f800000, 0}, {true, 0x40000000, 0x3f317218},
		{true, 0x40400000, 0x3f8c9f54}, {true, 0x1e3ce508, 0xc23834f1}, {true, 0x60ad78ec, 0x423834f1},
		{true, 0x3f800001, 0x33ffffff}, {true, 0, 0xff800000},
	} {
		x := math.Float32frombits(tc.x)
		f, name := GlibcExpf, "GlibcExpf"
		if tc.log {
			f, name = GlibcLogf, "GlibcLogf"
		}
		if got := f(x); math.Float32bits(got) != tc.y {
			t.Errorf("%s(%g = %#08x) = %g (%#08x), glibc %g (%#08x)", name, x, tc.x, got, math.Float32bits(got), math.Float32frombits(tc.y), tc.y)
		}
	}
	if v := GlibcExpf(float32(math.NaN())); v == v {
		t.Errorf("GlibcExpf(NaN) = %v", v)
	}
}
