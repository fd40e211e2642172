package grammar

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

const personSchema = `{"type":"object","properties":{
	"name":{"type":"string","minLength":1,"maxLength":8},
	"age":{"type":"integer"},
	"score":{"type":"number"},
	"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3},
	"ok":{"type":["boolean","null"]}},
	"required":["name","age"]}`

func accepts(t *testing.T, s *Schema, text string) bool {
	t.Helper()
	m := NewMachine(s)
	return m.Feed(text) && m.CanEnd()
}

func TestMachine(t *testing.T) {
	person, err := Compile([]byte(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want bool
	}{
		{`{"name":"Al","age":3}`, true},
		{`{ "age" : -12 , "name" : "Zoë" , "tags" : ["a","c"], "ok": null }`, true},
		{"{\n  \"name\": \"x\",\n  \"age\": 0,\n  \"score\": 1.5e+3\n}", true},
		{`{"name":"Al"}`, false},                                  // age required
		{`{"name":"","age":1}`, false},                            // minLength
		{`{"name":"123456789","age":1}`, false},                   // maxLength
		{`{"name":"Al","age":1.5}`, false},                        // integer
		{`{"name":"Al","age":01}`, false},                         // leading zero
		{`{"name":"Al","age":1,"age":2}`, false},                  // key twice
		{`{"name":"Al","age":1,"x":2}`, false},                    // undeclared key
		{`{"name":"Al","age":1,"tags":["d"]}`, false},             // enum
		{`{"name":"Al","age":1,"tags":["a","a","a","a"]}`, false}, // maxItems
		{`{"name":"A\u00e9\n","age":1}`, true},
		{`{"name":"A\x","age":1}`, false},
		{`{"name":"Al","age":1,}`, false},
		{`{"name":"Al","age":1}x`, false},
		{`{"name":"Al","age":1,"ok":true}`, true},
		{`{"name":"Al","age":1,"ok":"yes"}`, false},
	} {
		if got := accepts(t, person, c.text); got != c.want {
			t.Errorf("%s: accepted %v, want %v", c.text, got, c.want)
		}
	}
	any := AnyObject()
	for _, c := range []struct {
		text string
		want bool
	}{
		{`{}`, true}, {`{"a":[1,{"b":null}],"c":"d"}`, true}, {`[1]`, false}, {`"s"`, false}, {`{"a":tru}`, false},
	} {
		if got := accepts(t, any, c.text); got != c.want {
			t.Errorf("json_object %s: accepted %v, want %v", c.text, got, c.want)
		}
	}
	num, _ := Compile([]byte(`{"type":"number"}`))
	for text, want := range map[string]bool{"12": true, "-0.5": true, "1e": false, "1.": false, "-": false, "3E-2": true} {
		if got := accepts(t, num, text); got != want {
			t.Errorf("number %s: accepted %v, want %v", text, got, want)
		}
	}
	wrapped := NewWrapped("<a>", num, "</a>")
	if !wrapped.Feed("<a>42</a>") || !wrapped.CanEnd() {
		t.Error("wrapped number not accepted")
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, c := range []struct {
		schema string
		want   error
	}{
		{`{"anyOf":[{"type":"string"}],"type":"string"}`, ErrUnsupported},
		{`{"type":"string","pattern":"^a\\b$"}`, ErrUnsupported},
		{`{"type":"integer","multipleOf":3}`, ErrUnsupported},
		{`{"type":"strin"}`, ErrBadSchema},
		{`{"enum":[]}`, ErrBadSchema},
		{`[1]`, ErrBadSchema},
		{`{"type":"array","minItems":3,"maxItems":2}`, ErrBadSchema},
		{`{`, ErrBadSchema},
	} {
		if _, err := Compile([]byte(c.schema)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.schema, err, c.want)
		}
	}
}

// Random walks through the machine, each step a random allowed byte
// (found by trying them all), end in texts that parse and validate.
func TestRandomWalksValidate(t *testing.T) {
	s, err := Compile([]byte(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for walk := range 300 {
		m := NewMachine(s)
		var text []byte
		for len(text) < 4000 {
			if m.CanEnd() && rng.IntN(4) == 0 {
				break
			}
			var next []byte
			var try Machine
			for c := range 256 {
				try.CopyFrom(m)
				if try.feed(byte(c)) {
					next = append(next, byte(c))
				}
			}
			if len(next) == 0 {
				break
			}
			c := next[rng.IntN(len(next))]
			m.feed(c)
			text = append(text, c)
		}
		if !m.CanEnd() {
			continue // cut short by the length limit
		}
		var v map[string]any
		if err := json.Unmarshal(text, &v); err != nil {
			t.Fatalf("walk %d: %q does not parse: %v", walk, text, err)
		}
		if _, ok := v["name"].(string); !ok {
			t.Fatalf("walk %d: %q has no string name", walk, text)
		}
		if age, ok := v["age"].(float64); !ok || age != math.Trunc(age) {
			t.Fatalf("walk %d: %q has no integer age", walk, text)
		}
	}
}

// Mask agrees with Allowed token by token, over a vocabulary whose pieces
// share prefixes.
func TestMaskAgreesWithAllowed(t *testing.T) {
	pieces := []string{"{", "{\"", "\"", "\"name", "\"name\":", "\":", ":", " ", "\"A", "A", "l", "1", "12", ",", "}", "\"}",
		"\"age\":", "age", "\"", "\\", "\\u", "00e9", "true", "null", "[", "]", "\"a\"", "<end>", ""}
	ends := []int32{27}
	for c := byte(' '); c <= '~'; c++ { // a byte-level vocabulary has every byte
		pieces = append(pieces, string(c))
	}
	v := NewVocab(len(pieces), func(id int32) string { return pieces[id] }, func(int32) bool { return false }, ends)
	s, err := Compile([]byte(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := NewConstraint(v, NewMachine(s))
	rng := rand.New(rand.NewPCG(3, 4))
	var text string
	for step := range 60 {
		logits := make([]float32, len(pieces))
		c.Mask(logits)
		var ok []int32
		for id := range logits {
			if masked := math.IsInf(float64(logits[id]), -1); masked == c.Allowed(int32(id)) {
				t.Fatalf("step %d: token %q masked %v, Allowed %v", step, pieces[id], masked, c.Allowed(int32(id)))
			} else if !masked {
				ok = append(ok, int32(id))
			}
		}
		if len(ok) == 0 {
			t.Fatalf("step %d: nothing allowed after %q", step, text)
		}
		id := ok[rng.IntN(len(ok))]
		if err := c.Accept(id); err != nil {
			t.Fatal(err)
		}
		text += pieces[id]
		if v.ends[id] {
			text = ""
			c = NewConstraint(v, NewMachine(s))
		}
	}
}

// FuzzMachine: whatever the machine accepts as a whole text is JSON.
func FuzzMachine(f *testing.F) {
	f.Add(`{"name":"Al","age":3}`)
	f.Add(`{"a":[1,2.5e3,"x\u0041"]}`)
	s, _ := Compile([]byte(personSchema))
	f.Fuzz(func(t *testing.T, text string) {
		for _, sch := range []*Schema{s, AnyObject(), anything} {
			m := NewMachine(sch)
			if m.Feed(text) && m.CanEnd() && !json.Valid([]byte(text)) {
				t.Fatalf("accepted %q, which is not JSON", text)
			}
		}
	})
}

// A control token is allowed where its text is the markup around the
// value (Mistral's [TOOL_CALLS] before the calls), never inside the JSON,
// whose strings would take its text; Mask agrees with Allowed.
func TestControlTokenOnlyInMarkup(t *testing.T) {
	pieces := []string{"[TOOL_CALLS]", "<|python_tag|>", "<end>"}
	const tc, py, end = 0, 1, 2
	for c := byte(' '); c <= '~'; c++ {
		pieces = append(pieces, string(c))
	}
	control := func(id int32) bool { return id <= end }
	v := NewVocab(len(pieces), func(id int32) string { return pieces[id] }, control, []int32{end})
	args, err := Compile([]byte(`{"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}`))
	if err != nil {
		t.Fatal(err)
	}
	masked := func(c *Constraint, id int32) bool {
		logits := make([]float32, len(pieces))
		c.Mask(logits)
		m := math.IsInf(float64(logits[id]), -1)
		if m == c.Allowed(id) {
			t.Fatalf("token %q: masked %v, Allowed %v", pieces[id], m, c.Allowed(id))
		}
		return m
	}
	c := NewConstraint(v, NewWrapped("[TOOL_CALLS][", CallKeyed("f", "arguments", args), "]"))
	if masked(c, tc) || !masked(c, py) {
		t.Fatal("at the start, [TOOL_CALLS] should be allowed and <|python_tag|> not")
	}
	ids := func(s string) []int32 {
		var out []int32
		for _, b := range []byte(s) {
			out = append(out, int32(3+b-' '))
		}
		return out
	}
	if err := c.Accept(tc); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids(`[{"name": "f", "arguments": {"q": "`) {
		if err := c.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if !masked(c, tc) {
		t.Error("[TOOL_CALLS] allowed inside a JSON string")
	}
	for _, id := range ids(`x"}}]`) {
		if err := c.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if !c.CanEnd() || masked(c, end) {
		t.Error("the call is whole but cannot end")
	}
	// A wrap whose markup the control token does not spell refuses it.
	c = NewConstraint(v, NewWrapped("<tool_call>\n", args, "\n</tool_call>"))
	if !masked(c, tc) {
		t.Error("[TOOL_CALLS] allowed before <tool_call>")
	}
	// Spelled out in plain characters, the markup is still accepted.
	c = NewConstraint(v, NewWrapped("[TOOL_CALLS][", CallKeyed("f", "arguments", args), "]"))
	for _, id := range ids(`[TOOL_CALLS][{"name": "f", "arguments": {"q": ""}}]`) {
		if err := c.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if !c.CanEnd() {
		t.Error("the spelled-out call cannot end")
	}
}

// FuzzWrappedUnion: what a union of wrapped machines (the v11 Mistral
// calls, one reading per tool) or a spaced wrap accepts as a whole text is
// one of the prefixes, then JSON.
func FuzzWrappedUnion(f *testing.F) {
	f.Add(`[TOOL_CALLS]a[ARGS]{"name":"Al","age":3}`)
	f.Add(`[TOOL_CALLS]b[ARGS]{}`)
	f.Add(`[TOOL_CALLS] [{"x": 1}]`)
	s, _ := Compile([]byte(personSchema))
	f.Fuzz(func(t *testing.T, text string) {
		u := Union(NewWrapped("[TOOL_CALLS]a[ARGS]", s, ""), NewWrapped("[TOOL_CALLS]b[ARGS]", AnyObject(), ""))
		if u.Feed(text) && u.CanEnd() {
			rest, ok := strings.CutPrefix(text, "[TOOL_CALLS]a[ARGS]")
			if !ok {
				rest, ok = strings.CutPrefix(text, "[TOOL_CALLS]b[ARGS]")
			}
			if !ok || !json.Valid([]byte(rest)) {
				t.Fatalf("union accepted %q", text)
			}
		}
		m := NewWrappedSpaced("[TOOL_CALLS]", Items(AnyObject(), 1, 1), "")
		if m.Feed(text) && m.CanEnd() {
			rest, ok := strings.CutPrefix(text, "[TOOL_CALLS]")
			var items []map[string]any
			if !ok || json.Unmarshal([]byte(rest), &items) != nil || len(items) != 1 {
				t.Fatalf("spaced wrap accepted %q", text)
			}
		}
	})
}
