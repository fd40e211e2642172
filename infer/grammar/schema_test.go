package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What zod (zodResponseFormat, zod-to-json-schema) writes for an object
// with .int() bounds, .nullable(), .optional(), a discriminated union and
// string checks.
const zodSchema = `{"type":"object","properties":{
	"name":{"type":"string","minLength":1},
	"age":{"type":"integer","minimum":0,"maximum":150},
	"email":{"type":"string","format":"email"},
	"nick":{"anyOf":[{"type":"string","maxLength":6},{"type":"null"}]},
	"tags":{"type":"array","items":{"type":"string","enum":["x","y"]},"maxItems":2},
	"kind":{"anyOf":[
		{"type":"object","properties":{"t":{"type":"string","const":"a"},"x":{"type":"number","exclusiveMinimum":0,"maximum":1}},"required":["t","x"],"additionalProperties":false},
		{"type":"object","properties":{"t":{"type":"string","const":"b"},"phone":{"type":"string","pattern":"^\\d{3}-\\d{4}$"}},"required":["t","phone"],"additionalProperties":false}]}},
	"required":["name","age","email","nick","kind"],"additionalProperties":false,
	"$schema":"http://json-schema.org/draft-07/schema#"}`

// What pydantic's model_json_schema writes: $defs and $ref (a recursive
// one too), anyOf with null and a default, titles, formats, type lists.
const pydanticSchema = `{"$defs":{
	"Pet":{"properties":{"name":{"title":"Name","type":"string"},"born":{"format":"date","title":"Born","type":"string"},
		"id":{"format":"uuid","type":"string"}},"required":["name","born"],"title":"Pet","type":"object"},
	"Node":{"properties":{"v":{"type":"integer","exclusiveMaximum":10,"minimum":-5},
		"kids":{"items":{"$ref":"#/$defs/Node"},"type":"array","maxItems":2}},"required":["v"],"type":"object"}},
	"properties":{"pets":{"items":{"$ref":"#/$defs/Pet"},"type":"array","minItems":1,"maxItems":3},
		"owner":{"anyOf":[{"type":"string","minLength":2,"maxLength":5},{"type":"null"}],"default":null},
		"tree":{"$ref":"#/$defs/Node"},
		"when":{"type":"string","format":"date-time"},
		"at":{"type":"string","format":"time"},
		"code":{"type":"string","pattern":"^[A-Z]{2}[a-z0-9_]*$","maxLength":6},
		"score":{"type":["number","null"],"minimum":-1.5,"maximum":2.25},
		"pet":{"allOf":[{"$ref":"#/$defs/Pet"}],"description":"pydantic v1's way"},
		"pair":{"type":"array","prefixItems":[{"type":"integer","minimum":0,"maximum":9},{"type":"string","maxLength":2}],"minItems":2,"maxItems":2}},
	"required":["pets","tree"],"title":"Model","type":"object"}`

func decodeSchema(t testing.TB, text string) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func mustCompile(t testing.TB, text string) *Schema {
	t.Helper()
	s, err := Compile([]byte(text))
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return s
}

// walkBytes are the bytes a random walk tries: JSON's punctuation, digits,
// letters, escapes and a two-byte character.
var walkBytes = []byte("\"]}0123456789-.:,{[ \n\\/abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_@+eEtT\xc3\xa9")

// walk generates a random text the machine of s accepts, byte by byte:
// any allowed byte at first, the closing ones first once the text is long.
// ok is false when it found no end within the limit.
func walk(s *Schema, rng *rand.Rand) (text string, ok bool) {
	m, try := NewMachine(s), &Machine{}
	var out []byte
	for len(out) < 4000 {
		if m.CanEnd() && rng.IntN(4) == 0 {
			return string(out), true
		}
		order := append([]byte(nil), walkBytes...)
		if len(out) < 300 {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		took := false
		for _, c := range order {
			try.CopyFrom(m)
			if try.feed(c) {
				m, try = try, m
				out = append(out, c)
				took = true
				break
			}
		}
		if !took {
			if m.CanEnd() {
				return string(out), true
			}
			// A dead end: no byte leads on and the text cannot end.
			return string(out), false
		}
	}
	return string(out), false
}

// Issue 34 item 2: every text the machines of what zod and pydantic write
// accept validates against the schema (by a validator written apart from
// the machine), and a walk never meets a dead end.
func TestGeneratedTextsValidate(t *testing.T) {
	lengths := `{"type":"object","properties":{"e":{"type":"string","format":"email","minLength":8,"maxLength":20},
		"p":{"type":"string","pattern":"^(ab)*c?$","minLength":3,"maxLength":7},"q":{"type":"string","pattern":"^[0-9]+x?$","minLength":4}},"required":["e","p","q"]}`
	for _, text := range []string{zodSchema, pydanticSchema, personSchema, lengths} {
		s := mustCompile(t, text)
		root := decodeSchema(t, text)
		rng := rand.New(rand.NewPCG(1, 2))
		ended := 0
		for range 300 {
			out, ok := walk(s, rng)
			if !ok {
				if len(out) < 4000 {
					t.Fatalf("a dead end after %q", out)
				}
				continue
			}
			ended++
			var v any
			dec := json.NewDecoder(strings.NewReader(out))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil || dec.More() {
				t.Fatalf("%q does not parse: %v", out, err)
			}
			if err := validate(root, root, v); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
		}
		if ended < 200 {
			t.Errorf("only %d of 300 walks ended", ended)
		}
	}
}

func TestUnionsRefsAndFormats(t *testing.T) {
	for _, c := range []struct {
		schema, text string
		want         bool
	}{
		{zodSchema, `{"name":"A","age":150,"email":"a.b@c.io","nick":null,"kind":{"t":"a","x":0.25}}`, true},
		{zodSchema, `{"kind":{"phone":"555-1234","t":"b"},"nick":"bob","email":"x@y.zz","age":0,"name":"Z"}`, true},
		{zodSchema, `{"name":"A","age":151,"email":"a@b.c","nick":null,"kind":{"t":"a","x":1}}`, false},
		{zodSchema, `{"name":"A","age":1,"email":"a@b.c","nick":null,"kind":{"t":"a","x":0}}`, false},
		{zodSchema, `{"name":"A","age":1,"email":"a@b.c","nick":null,"kind":{"t":"b","x":0.5}}`, false},
		{zodSchema, `{"name":"A","age":1,"email":"a@b.c","nick":null,"kind":{"t":"b","phone":"5551234"}}`, false},
		{zodSchema, `{"name":"A","age":1,"email":"ab.c","nick":null,"kind":{"t":"a","x":1}}`, false},
		{zodSchema, `{"name":"A","age":1,"email":"a@b.c","nick":"toolongnick","kind":{"t":"a","x":1}}`, false},
		{pydanticSchema, `{"pets":[{"name":"Rex","born":"2020-02-29","id":"123e4567-e89b-12d3-a456-426614174000"}],"tree":{"v":9,"kids":[{"v":-5},{"v":0,"kids":[]}]},"owner":null}`, true},
		{pydanticSchema, `{"pets":[{"name":"Rex","born":"2020-13-01"}],"tree":{"v":1}}`, false},
		{pydanticSchema, `{"pets":[],"tree":{"v":1}}`, false},
		{pydanticSchema, `{"pets":[{"name":"R","born":"2020-01-01"}],"tree":{"v":10}}`, false},
		{pydanticSchema, `{"pets":[{"name":"R","born":"2020-01-01"}],"tree":{"v":1},"when":"2024-05-06T07:08:09.5+02:00","at":"23:59:60Z"}`, false},
		{pydanticSchema, `{"pets":[{"name":"R","born":"2020-01-01"}],"tree":{"v":1},"when":"2024-05-06T07:08:09.5+02:00","at":"23:59:59Z"}`, true},
		{pydanticSchema, `{"pets":[{"name":"R","born":"2020-01-01"}],"tree":{"v":1},"code":"AB_1","score":-1.5,"pet":{"name":"x","born":"1999-12-31"}}`, true},
		{pydanticSchema, `{"pets":[{"name":"R","born":"2020-01-01"}],"tree":{"v":1},"code":"AB_1234"}`, false},
		{pydanticSchema, `{"pets":[{"name":"R","born":"2020-01-01"}],"tree":{"v":1},"code":"Ab"}`, false},
		{pydanticSchema, `{"pets":[{"name":"R","born":"2020-01-01"}],"tree":{"v":1},"score":2.26}`, false},
		{pydanticSchema, `{"pets":[{"name":"R","born":"2020-01-01"}],"tree":{"v":1},"score":null}`, true},
		{`{"type":"string","pattern":"^caf\u00e9[0-9]?$"}`, `"café7"`, true},
		{`{"type":"string","pattern":"^caf\u00e9[0-9]?$"}`, `"cafe"`, false},
		{`{"type":"string","pattern":"ab"}`, `"xxabyy"`, true},
		{`{"type":"string","pattern":"ab"}`, `"xxa"`, false},
		{`{"type":"string","pattern":"^a\\nb$"}`, `"a\nb"`, true},
		{`{"type":"string","format":"uuid","pattern":"^[0-9a-f]{8}-[0-9a-f]{4}-4"}`, `"123e4567-e89b-42d3-a456-426614174000"`, true},
		{`{"type":"string","format":"uuid","pattern":"^[0-9a-f]{8}-[0-9a-f]{4}-4"}`, `"123e4567-e89b-12d3-a456-426614174000"`, false},
		{`{"type":"string","format":"uuid","pattern":"^[0-9a-f]{8}-[0-9a-f]{4}-4"}`, `"123e4567-e89b-4"`, false},
		{`{"type":"string","format":"email"}`, `".a@b.io"`, false},
		{`{"type":"string","format":"email"}`, `"a..b@b.io"`, false},
		{`{"type":"string","format":"email"}`, `"a.b+c@mail.b-c.io"`, true},
		{`{"oneOf":[{"type":"integer"},{"type":"boolean"}],"nullable":true}`, `null`, true},
		{`{"type":"string","nullable":true}`, `null`, true},
		{`{"type":"array","prefixItems":[{"type":"integer","maximum":3},{"type":"string"}],"minItems":2,"maxItems":2}`, `[3,"a"]`, true},
		{`{"type":"array","prefixItems":[{"type":"integer","maximum":3},{"type":"string"}],"minItems":2,"maxItems":2}`, `[4,"a"]`, false},
		{`{"type":"array","prefixItems":[{"type":"integer","maximum":3},{"type":"string"}],"minItems":2,"maxItems":2}`, `[3]`, false},
		{`{"type":"array","prefixItems":[{"type":"integer"}],"items":false}`, `[3,4]`, false},
		{`{"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"boolean"}}`, `[3,true,false]`, true},
		{`{"type":"array","items":[{"type":"integer"}],"additionalItems":{"type":"boolean"}}`, `[3,true,1]`, false},
		{`{"$ref":"#/definitions/a","definitions":{"a":{"$ref":"#/definitions/b"},"b":{"type":"integer","minimum":1}}}`, `0`, false},
		{`{"$ref":"#/definitions/a","definitions":{"a":{"$ref":"#/definitions/b"},"b":{"type":"integer","minimum":1}}}`, `1`, true},
		{`{"anyOf":[{"$ref":"#"},{"type":"array","items":{"$ref":"#"},"maxItems":1},{"type":"null"}]}`, `[[[null]]]`, true},
		{`{"anyOf":[{"$ref":"#"},{"type":"array","items":{"$ref":"#"},"maxItems":1},{"type":"null"}]}`, `[null,null]`, false},
	} {
		s := mustCompile(t, c.schema)
		if got := accepts(t, s, c.text); got != c.want {
			t.Errorf("%.60s… %s: accepted %v, want %v", c.schema, c.text, got, c.want)
		}
	}
}

// Integer bounds are held exactly: every integer in and around a few
// ranges is accepted if and only if it lies inside, and a prefix no number
// in range starts with is refused at once.
func TestIntegerRanges(t *testing.T) {
	for _, r := range [][2]int{{-12, 345}, {100, 200}, {-1000, -999}, {0, 0}, {7, 7}, {-5, 9}, {19, 1001}} {
		sch := mustCompile(t, `{"type":"integer","minimum":`+strconv.Itoa(r[0])+`,"maximum":`+strconv.Itoa(r[1])+`}`)
		ex := mustCompile(t, `{"type":"integer","exclusiveMinimum":`+strconv.Itoa(r[0]-1)+`,"exclusiveMaximum":`+strconv.Itoa(r[1]+1)+`}`)
		for v := -1500; v <= 1500; v++ {
			want := r[0] <= v && v <= r[1]
			text := strconv.Itoa(v)
			if got := accepts(t, sch, text); got != want {
				t.Errorf("[%d,%d] %s: accepted %v", r[0], r[1], text, got)
			}
			if got := accepts(t, ex, text); got != want {
				t.Errorf("(%d,%d) exclusive %s: accepted %v", r[0]-1, r[1]+1, text, got)
			}
			// Each prefix is taken only if some number in range starts so.
			for i := 1; i < len(text); i++ {
				p := text[:i]
				starts := false
				for w := r[0]; w <= r[1]; w++ {
					starts = starts || strings.HasPrefix(strconv.Itoa(w), p)
				}
				if m := NewMachine(sch); m.Feed(p) != starts {
					t.Errorf("[%d,%d] prefix %q: taken %v", r[0], r[1], p, !starts)
				}
			}
		}
		for _, bad := range []string{"-0", "1.0", "1e1", "0" + strconv.Itoa(r[0])} {
			if accepts(t, sch, bad) {
				t.Errorf("[%d,%d] %s accepted", r[0], r[1], bad)
			}
		}
	}
}

func TestNumberBounds(t *testing.T) {
	s := mustCompile(t, `{"type":"number","exclusiveMinimum":0,"maximum":1.5}`)
	for text, want := range map[string]bool{"0": false, "0.0": false, "0.000001": true, "0.0000001": false, "1.5": true,
		"1.500000": true, "1.5000001": false, "1.6": false, "2": false, "-0.1": false, "1": true, "1e0": false, "0.75": true} {
		if got := accepts(t, s, text); got != want {
			t.Errorf("%s: accepted %v, want %v", text, got, want)
		}
	}
	// draft 4's boolean exclusive bounds
	s = mustCompile(t, `{"type":"integer","minimum":3,"exclusiveMinimum":true,"maximum":5,"exclusiveMaximum":true}`)
	for text, want := range map[string]bool{"3": false, "4": true, "5": false} {
		if got := accepts(t, s, text); got != want {
			t.Errorf("draft 4 %s: accepted %v, want %v", text, got, want)
		}
	}
}

// Issue 34 item 2: the constructs zod and pydantic write compile; what is
// out of reach is refused naming the keyword.
func TestCompileNamesWhatItRefuses(t *testing.T) {
	for _, c := range []struct {
		schema, name string
		want         error
	}{
		{`{"type":"integer","multipleOf":3}`, "multipleOf", ErrUnsupported},
		{`{"oneOf":[{"type":"number"},{"type":"integer"}]}`, "oneOf", ErrUnsupported},
		{`{"oneOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}]}`, "oneOf", ErrUnsupported},
		{`{"oneOf":[{"enum":["a","b"]},{"enum":["b","c"]}]}`, "oneOf", ErrUnsupported},
		{`{"not":{"type":"string"}}`, "not", ErrUnsupported},
		{`{"type":"array","uniqueItems":true}`, "uniqueItems", ErrUnsupported},
		{`{"type":"array","prefixItems":[{"type":"string"}],"items":false,"minItems":2}`, "minimum", ErrBadSchema},
		{`{"allOf":[{"type":"string"},{"maxLength":3}]}`, "allOf", ErrUnsupported},
		{`{"type":"object","anyOf":[{"required":["a"]}]}`, "anyOf beside type", ErrUnsupported},
		{`{"$ref":"https://example.com/s.json"}`, "$ref", ErrUnsupported},
		{`{"$ref":"#/$defs/missing"}`, "$ref", ErrBadSchema},
		{`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`, "loop", ErrBadSchema},
		{`{"anyOf":[{"$ref":"#"}]}`, "anyOf", ErrBadSchema},
		{`{"type":"string","pattern":"^a\\b$"}`, "pattern", ErrUnsupported},
		{`{"type":"string","pattern":"^[a-z]{5}$","maxLength":3}`, "pattern", ErrUnsupported},
		{`{"type":"string","pattern":"^(aa)*$","minLength":3,"maxLength":3}`, "pattern", ErrUnsupported},
		{`{"type":"string","pattern":"^(a|b"}`, "pattern", ErrUnsupported},
		{`{"type":"integer","minimum":5,"maximum":3}`, "bounds", ErrUnsupported},
		{`{"type":"number","minimum":0.0000001,"maximum":0.0000002}`, "bounds", ErrUnsupported},
	} {
		_, err := Compile([]byte(c.schema))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.schema, err, c.want)
			continue
		}
		if word := strings.Fields(c.name)[0]; word != "bounds" && word != "loop" && !strings.Contains(err.Error(), word) {
			t.Errorf("%s: %q does not name %s", c.schema, err, word)
		}
	}
}

// oneOf compiles where its alternatives cannot both match: told apart by
// type, by enum or const values, by a required property (a discriminator)
// or by a required key the other, closed, does not declare.
func TestOneOfOfDisjointAlternatives(t *testing.T) {
	for _, schema := range []string{
		`{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]}`,
		`{"oneOf":[{"enum":["a","b"]},{"enum":["c",1]},{"const":2.5}]}`,
		`{"oneOf":[{"type":"object","properties":{"t":{"const":"a"},"x":{"type":"integer"}},"required":["t","x"]},
			{"type":"object","properties":{"t":{"const":"b"}},"required":["t"]}]}`,
		`{"oneOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false},
			{"type":"object","properties":{"b":{"type":"string"}},"required":["b"],"additionalProperties":false}]}`,
		`{"$defs":{"Cat":{"type":"object","properties":{"pet_type":{"const":"cat"},"meows":{"type":"integer"}},"required":["pet_type","meows"]},
			"Dog":{"type":"object","properties":{"pet_type":{"const":"dog"},"barks":{"type":"number"}},"required":["pet_type","barks"]}},
			"oneOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}],"discriminator":{"propertyName":"pet_type"}}`,
	} {
		s := mustCompile(t, schema)
		root := decodeSchema(t, schema)
		rng := rand.New(rand.NewPCG(5, 6))
		for range 100 {
			out, ok := walk(s, rng)
			if !ok {
				continue
			}
			var v any
			dec := json.NewDecoder(strings.NewReader(out))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			if err := validate(root, root, v); err != nil {
				t.Fatalf("%s: %q: %v", schema, out, err)
			}
		}
	}
}

// FuzzCompile: any document compiles or is refused, quickly, and a
// compiled schema's machine takes any bytes without failing.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{zodSchema, pydanticSchema, personSchema, `{"anyOf":[{"$ref":"#"},{"type":"array","items":{"$ref":"#"}}]}`,
		`{"type":"string","pattern":"^(a|b)*c{2,5}$"}`, `{"type":"number","minimum":-1e300,"maximum":1e300}`} {
		f.Add([]byte(s), []byte(`{"a":[1,2,{"b":"c"}],"t":"a"}`))
	}
	f.Fuzz(func(t *testing.T, schema, text []byte) {
		s, err := Compile(schema)
		if err != nil {
			if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrBadSchema) {
				t.Fatalf("an error of no kind: %v", err)
			}
			return
		}
		m := NewMachine(s)
		for _, c := range text {
			if !m.feed(c) {
				break
			}
		}
		if len(m.ends) > maxStacks {
			t.Fatalf("%d stacks", len(m.ends))
		}
	})
}

// Hostile schemas cost little to compile or refuse: deep nesting, a wide
// union of unions, a chain of references, a pattern of many states.
func TestHostileSchemasBounded(t *testing.T) {
	var deep bytes.Buffer
	for range 10000 {
		deep.WriteString(`{"type":"array","items":`)
	}
	deep.WriteString(`{}`)
	deep.WriteString(strings.Repeat("}", 10000))
	var defs []string
	for i := range 2000 {
		defs = append(defs, `"d`+strconv.Itoa(i)+`":{"anyOf":[{"$ref":"#/$defs/d`+strconv.Itoa(i+1)+`"},{"$ref":"#/$defs/d`+strconv.Itoa((i*7)%2000)+`"},{"type":"integer"}]}`)
	}
	chain := `{"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `,"d2000":{"type":"string"}}}`
	for name, schema := range map[string]string{
		"deep":    deep.String(),
		"chain":   chain,
		"pattern": `{"type":"string","pattern":"^(a|b)*a(a|b){40}$"}`,
		"lengths": `{"type":"string","pattern":"^[a-z]*$","minLength":100000,"maxLength":200000}`,
	} {
		start := testingNow()
		s, err := Compile([]byte(schema))
		if took := testingSince(start); took > 2e9 {
			t.Errorf("%s: %v to compile", name, took)
		}
		if err == nil {
			m := NewMachine(s)
			m.Feed(strings.Repeat("[", 100))
		}
	}
	// A union of many overlapping alternatives keeps a bounded number of
	// readings.
	var alts []string
	for range 500 {
		alts = append(alts, `{"type":"array"}`)
	}
	s := mustCompile(t, `{"type":"array","items":{"anyOf":[`+strings.Join(alts, ",")+`]}}`)
	m := NewMachine(s)
	if !m.Feed("[[[],[[") || len(m.ends) > maxStacks {
		t.Errorf("%d readings", len(m.ends))
	}
}

func testingNow() int64              { return time.Now().UnixNano() }
func testingSince(start int64) int64 { return time.Now().UnixNano() - start }

// An enum value the schema's other keywords refuse is not generated; a
// union of tool calls (the name first) tells the tools apart by the name.
func TestEnumFilteredAndCallsOrdered(t *testing.T) {
	s := mustCompile(t, `{"type":"string","enum":["a",1,"bb",null],"maxLength":1}`)
	for text, want := range map[string]bool{`"a"`: true, `1`: false, `"bb"`: false, `null`: false} {
		if got := accepts(t, s, text); got != want {
			t.Errorf("%s: accepted %v, want %v", text, got, want)
		}
	}
	if _, err := Compile([]byte(`{"type":"integer","enum":[1.5,"x"]}`)); !errors.Is(err, ErrBadSchema) {
		t.Errorf("an enum no value of which fits: %v", err)
	}
	var calls []*Schema
	for i := range 200 {
		calls = append(calls, Call("f"+strconv.Itoa(i), mustCompile(t, `{"type":"object","properties":{"n":{"type":"integer","minimum":`+strconv.Itoa(i)+`}},"required":["n"]}`)))
	}
	u := AnyOf(calls...)
	for text, want := range map[string]bool{`{"name":"f199","arguments":{"n":199}}`: true, `{"name":"f199","arguments":{"n":198}}`: false,
		`{"name":"f7","arguments":{"n":7}}`: true, `{"arguments":{"n":7},"name":"f7"}`: false, `{"name":"f200","arguments":{"n":300}}`: false} {
		if got := accepts(t, u, text); got != want {
			t.Errorf("%s: accepted %v, want %v", text, got, want)
		}
	}
}

// Nesting is bounded: past maxNesting open values no object or array
// opens, so a recursive schema's reply cannot make each mask's copies grow
// without bound.
func TestNestingBounded(t *testing.T) {
	for _, schema := range []string{`{"type":"object"}`, `{"anyOf":[{"type":"array","items":{"$ref":"#"}},{"type":"null"}]}`} {
		s := mustCompile(t, schema)
		m := NewMachine(s)
		prefix := strings.Repeat(`[`, maxNesting)
		if strings.Contains(schema, "object") {
			prefix = `{"a":` + strings.Repeat(`[`, maxNesting-1)
		}
		if !m.Feed(prefix) {
			t.Fatalf("%s: %d levels refused", schema, maxNesting)
		}
		if m.Feed("[") {
			t.Errorf("%s: more than %d levels", schema, maxNesting)
		}
	}
}
