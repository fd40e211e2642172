// Package shaders holds the WGSL compute kernels of the GPU backend
// (infer/gpu) and a tiny preprocessor for them.
//
// WGSL under wgpu 0.19 has no override constants, so every kernel is
// specialised by text: Source prepends `const NAME: T = value;` lines and
// resolves `//#if NAME` / `//#else` / `//#endif` blocks (NAME true when its
// define is present and not "0"); blocks nest. A line `//#include NAME`
// is replaced by the fragment NAME.wgsli (code several kernels share;
// fragments include nothing themselves).
package shaders

import (
	"embed"
	"errors"
	"fmt"
	"sort"
	"strings"
)

//go:embed *.wgsl *.wgsli
var files embed.FS

// ErrUnknown is returned for a kernel name with no .wgsl file.
var ErrUnknown = errors.New("unknown shader")

// Const is one specialisation constant: Type is a WGSL scalar type ("u32",
// "f32", "i32") and Value its literal without suffix.
type Const struct {
	Type  string
	Value string
}

// U32 and F32 build constants.
func U32(v int) Const     { return Const{"u32", fmt.Sprintf("%du", v)} }
func F32(v float32) Const { return Const{"f32", fmt.Sprintf("%g", v)} }

// Flag is a define for //#if blocks with no constant emitted.
func Flag(on bool) Const {
	if on {
		return Const{"", "1"}
	}
	return Const{"", "0"}
}

// Has reports whether kernel name has a .wgsl file.
func Has(name string) bool {
	_, err := files.Open(name + ".wgsl")
	return err == nil
}

// Source returns the specialised WGSL of kernel name.
func Source(name string, defs map[string]Const) (string, error) {
	body, err := files.ReadFile(name + ".wgsl")
	if err != nil {
		return "", fmt.Errorf("shaders: %q: %w", name, ErrUnknown)
	}
	body, err = includeFragments(body)
	if err != nil {
		return "", fmt.Errorf("shaders: %s: %w", name, err)
	}
	keys := make([]string, 0, len(defs))
	for k := range defs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		c := defs[k]
		if c.Type == "" {
			continue
		}
		v := c.Value
		if c.Type == "f32" && !strings.ContainsAny(v, ".eEn") {
			v += ".0"
		}
		fmt.Fprintf(&b, "const %s: %s = %s;\n", k, c.Type, v)
	}
	out, err := preprocess(string(body), defs)
	if err != nil {
		return "", fmt.Errorf("shaders: %s: %w", name, err)
	}
	b.WriteString(out)
	return b.String(), nil
}

func preprocess(src string, defs map[string]Const) (string, error) {
	var b strings.Builder
	// One entry per open //#if: whether its current branch is taken, and
	// whether its //#else was seen. A line is kept when every open branch
	// is taken.
	type level struct{ taking, inElse bool }
	var open []level
	keeping := func() bool {
		for _, l := range open {
			if !l.taking {
				return false
			}
		}
		return true
	}
	for i, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "//#if "):
			c, ok := defs[strings.TrimSpace(t[len("//#if "):])]
			open = append(open, level{taking: ok && c.Value != "0" && c.Value != "0u"})
			continue
		case t == "//#else":
			if len(open) == 0 || open[len(open)-1].inElse {
				return "", fmt.Errorf("line %d: //#else without //#if", i+1)
			}
			top := &open[len(open)-1]
			top.taking, top.inElse = !top.taking, true
			continue
		case t == "//#endif":
			if len(open) == 0 {
				return "", fmt.Errorf("line %d: //#endif without //#if", i+1)
			}
			open = open[:len(open)-1]
			continue
		}
		if keeping() {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	if len(open) != 0 {
		return "", errors.New("unterminated //#if")
	}
	return b.String(), nil
}

// includeFragments replaces each `//#include NAME` line of src by the
// fragment NAME.wgsli.
func includeFragments(src []byte) ([]byte, error) {
	if !strings.Contains(string(src), "//#include ") {
		return src, nil
	}
	var b strings.Builder
	for i, line := range strings.Split(string(src), "\n") {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "//#include ") {
			b.WriteString(line)
			b.WriteByte('\n')
			continue
		}
		frag, err := files.ReadFile(strings.TrimSpace(t[len("//#include "):]) + ".wgsli")
		if err != nil {
			return nil, fmt.Errorf("line %d: %w: %s", i+1, ErrUnknown, t)
		}
		if strings.Contains(string(frag), "//#include ") {
			return nil, fmt.Errorf("line %d: %s: fragments cannot include", i+1, t)
		}
		b.Write(frag)
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}
