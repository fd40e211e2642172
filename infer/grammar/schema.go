// Package grammar constrains generation to JSON that validates against a
// schema: a byte-level pushdown recognizer of the schema's JSON (Machine)
// and, over a tokenizer's vocabulary, the mask of the tokens whose bytes
// it accepts next (Constraint). Sampling only from allowed tokens makes the
// reply parse and validate by construction, whatever the model prefers.
//
// The schema subset is what structured-output clients send (zod, pydantic,
// openai's helpers, invopop/jsonschema): type (one or a list), nullable,
// enum, const, properties, required, additionalProperties, items,
// prefixItems (tuples, and draft 7's items list with additionalItems),
// minItems, maxItems, minLength, maxLength, pattern (a regular expression
// of Go's syntax without inner anchors or lookarounds), format (date-time,
// date, time, uuid, email; others are annotations), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, anyOf, oneOf, allOf of one schema,
// and $ref into the document ($defs, definitions, any JSON pointer;
// recursion included). Keywords that would constrain beyond that
// (multipleOf, not, if, uniqueItems, …) are refused with ErrUnsupported
// naming them rather than ignored, so that a reply never fails a validator
// the client runs. Annotations (title, description, default, examples,
// $schema, …) are ignored.
//
// Two liberties, both toward fewer values than the schema allows: with
// declared properties no undeclared key is generated, and a bounded number
// has at most 6 fraction digits and no exponent. oneOf is read as anyOf,
// which is the same where no value matches two alternatives: it is taken
// where they are told apart (by type, enum or const, a required property
// such as a discriminator, or a key only one of two closed objects has)
// and refused elsewhere.
package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ErrUnsupported is returned for a schema keyword the recognizer cannot
// enforce.
var ErrUnsupported = errors.New("unsupported JSON schema")

// ErrBadSchema is returned for a schema that is not valid JSON Schema.
var ErrBadSchema = errors.New("invalid JSON schema")

// Type bits of Schema.types.
const (
	tObject = 1 << iota
	tArray
	tString
	tNumber
	tInteger
	tBoolean
	tNull
	tAny = tObject | tArray | tString | tNumber | tInteger | tBoolean | tNull
)

var typeBits = map[string]uint8{
	"object": tObject, "array": tArray, "string": tString, "number": tNumber,
	"integer": tInteger, "boolean": tBoolean, "null": tNull,
}

// Schema is a compiled schema.
type Schema struct {
	types uint8
	enum  []string // JSON encodings of the allowed values, sorted; nil: no enum
	// alts, when set, make the schema a union: a value of any of them
	// (never themselves unions).
	alts []*Schema
	// Objects: declared properties (keys as JSON strings, quotes included),
	// sorted by key; required as a bit per property. Without declared
	// properties any key is allowed, its value validated by extra.
	props    []prop
	ordered  bool // the properties come in their order (else sorted by key, in any order)
	closed   bool // additionalProperties false: a validator takes no other key
	required uint64
	extra    *Schema
	// Arrays: the items, the first ones by prefix (a tuple); items nil:
	// none past the prefix.
	prefix             []*Schema
	items              *Schema
	minItems, maxItems int // maxItems −1: no limit
	// Strings, in characters.
	minLen, maxLen int // maxLen −1: no limit
	// pat, when set, recognizes the string's characters (pattern, format
	// and the length bounds together).
	pat *dfa
	// Numbers: bounded ones are held to [lo, hi] in units of 10^−frac.
	bounded bool
	frac    int
	lo, hi  int64
}

type prop struct {
	key    string
	schema *Schema
}

// maxProps is how many declared properties an object may have (a bit
// each in a uint64).
const maxProps = 64

// maxDepth bounds the nesting of a schema's text: a document nested
// deeper is hostile, not a type.
const maxDepth = 64

// anything allows every JSON value.
var anything = &Schema{types: tAny, maxItems: -1, maxLen: -1}

func init() { anything.items, anything.extra = anything, anything }

// AnyObject is the schema of response_format json_object: any JSON object.
func AnyObject() *Schema {
	return &Schema{types: tObject, extra: anything, maxItems: -1, maxLen: -1}
}

var ignored = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "example": true,
	"$schema": true, "$id": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"strict": true, "$defs": true, "definitions": true, "discriminator": true, "contentEncoding": true,
	"contentMediaType": true, "x-order": true,
}

// compiler holds one document's state: its root for $ref, the schemas
// compiled for each pointer, and the counts that bound its cost.
type compiler struct {
	root   any
	refs   map[string]*Schema
	unions []*Schema // to flatten once every $ref is filled
	oneOfs []oneOf   // to check once flattened
	values int       // enum and const values so far
	states int       // pattern automaton states so far
}

// Compile reads a JSON schema.
func Compile(raw []byte) (*Schema, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	c := &compiler{root: v, refs: map[string]*Schema{}}
	s, err := c.compile(v, "#", 0)
	if err != nil {
		return nil, err
	}
	if err := c.flatten(); err != nil {
		return nil, err
	}
	return s, nil
}

// MaxEnumValues bounds the enum and const values of one schema, all its
// parts together. A mask's cost grows with the log of an enum's size, but
// compiling and holding the values grows with their number; no
// structured-output schema in use comes near this.
const MaxEnumValues = 16384

type oneOf struct {
	u  *Schema
	at string
}

// compile reads the schema v found at the JSON pointer at.
func (c *compiler) compile(v any, at string, depth int) (*Schema, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: %s: nested more than %d deep", ErrUnsupported, at, maxDepth)
	}
	if b, ok := v.(bool); ok {
		if !b {
			return nil, fmt.Errorf("%w: %s: the schema false allows nothing", ErrUnsupported, at)
		}
		return anything, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not an object", ErrBadSchema, at)
	}
	// A schema that only names another ($ref, or allOf of one) is that
	// one; with constraints beside it, both would have to hold.
	for _, k := range []string{"$ref", "allOf"} {
		if _, ok := obj[k]; !ok {
			continue
		}
		for other := range obj {
			if other != k && !ignored[other] {
				return nil, fmt.Errorf("%w: %s/%s beside %s", ErrUnsupported, at, k, other)
			}
		}
		if k == "$ref" {
			ref, ok := obj[k].(string)
			if !ok {
				return nil, fmt.Errorf("%w: %s/$ref must be a string", ErrBadSchema, at)
			}
			return c.ref(ref, at, depth)
		}
		all, ok := obj[k].([]any)
		if !ok || len(all) != 1 {
			return nil, fmt.Errorf("%w: %s/allOf of %d schemas (one is supported)", ErrUnsupported, at, len(all))
		}
		return c.compile(all[0], at+"/allOf/0", depth+1)
	}
	s := &Schema{}
	return s, c.fill(s, obj, at, depth)
}

// ref is the schema a $ref names: a JSON pointer into the document.
// Each pointer is compiled once, so a recursive schema refers to itself
// and a document's cost is bounded by its size.
func (c *compiler) ref(ref, at string, depth int) (*Schema, error) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("%w: %s/$ref %q: only references into the schema itself (#/…)", ErrUnsupported, at, ref)
	}
	if p, err := url.PathUnescape(ptr); err == nil {
		ptr = p
	}
	var chain []string // pointers that are only references, followed to a schema
	for {
		if s, ok := c.refs[ptr]; ok {
			for _, p := range chain {
				c.refs[p] = s
			}
			return s, nil
		}
		if slices.Contains(chain, ptr) {
			return nil, fmt.Errorf("%w: %s/$ref %q: a loop of references with no schema", ErrBadSchema, at, ref)
		}
		target, err := resolve(c.root, ptr)
		if err != nil {
			return nil, fmt.Errorf("%w: %s/$ref %q: %w", ErrBadSchema, at, ref, err)
		}
		chain = append(chain, ptr)
		obj, ok := target.(map[string]any)
		next, isRef := obj["$ref"].(string)
		if !ok || !isRef || !onlyAnnotations(obj, "$ref") {
			break
		}
		if ptr, ok = strings.CutPrefix(next, "#"); !ok {
			return nil, fmt.Errorf("%w: %s/$ref %q: only references into the schema itself (#/…)", ErrUnsupported, at, next)
		}
		if p, err := url.PathUnescape(ptr); err == nil {
			ptr = p
		}
	}
	target, _ := resolve(c.root, chain[len(chain)-1])
	s := &Schema{}
	for _, p := range chain {
		c.refs[p] = s
	}
	if b, ok := target.(bool); ok {
		t, err := c.compile(b, "#"+chain[len(chain)-1], depth+1)
		if err != nil {
			return nil, err
		}
		*s = *t
		return s, nil
	}
	obj, ok := target.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s/$ref %q is not a schema", ErrBadSchema, at, ref)
	}
	if _, ok := obj["allOf"]; ok {
		// allOf of one: the same as that one, copied in once compiled.
		t, err := c.compile(obj, "#"+chain[len(chain)-1], depth+1)
		if err != nil {
			return nil, err
		}
		if t == s {
			return nil, fmt.Errorf("%w: %s/$ref %q: a loop of references with no schema", ErrBadSchema, at, ref)
		}
		c.unions = append(c.unions, s) // filled from t once t is whole
		s.alts = []*Schema{t}
		return s, nil
	}
	return s, c.fill(s, obj, "#"+chain[len(chain)-1], depth+1)
}

func onlyAnnotations(obj map[string]any, but string) bool {
	for k := range obj {
		if k != but && !ignored[k] {
			return false
		}
	}
	return true
}

// resolve follows a JSON pointer (RFC 6901) from root.
func resolve(root any, ptr string) (any, error) {
	if ptr == "" {
		return root, nil
	}
	if ptr[0] != '/' {
		return nil, fmt.Errorf("%q is not a JSON pointer", ptr)
	}
	v := root
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return nil, fmt.Errorf("no %q", tok)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("no item %q", tok)
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("no %q", tok)
		}
	}
	return v, nil
}

// fill compiles the schema object obj into s.
func (c *compiler) fill(s *Schema, obj map[string]any, at string, depth int) error {
	*s = Schema{types: tAny, maxItems: -1, maxLen: -1}
	for k, val := range obj {
		var err error
		switch k {
		case "type":
			s.types, err = types(val, at)
		case "nullable": // OpenAPI's
		case "uniqueItems":
			if b, _ := val.(bool); b {
				return fmt.Errorf("%w: %s/uniqueItems", ErrUnsupported, at)
			}
		case "enum":
			vals, ok := val.([]any)
			if !ok || len(vals) == 0 {
				return fmt.Errorf("%w: %s/enum must be a non-empty array", ErrBadSchema, at)
			}
			if c.values += len(vals); c.values > MaxEnumValues {
				return fmt.Errorf("%w: %s/enum: the schema has more than %d enum values", ErrUnsupported, at, MaxEnumValues)
			}
			s.enum, err = encodings(vals)
		case "const":
			c.values++
			s.enum, err = encodings([]any{val})
		case "anyOf", "oneOf":
			for other := range obj {
				if other != k && other != "nullable" && !ignored[other] {
					return fmt.Errorf("%w: %s/%s beside %s", ErrUnsupported, at, k, other)
				}
			}
			alts, ok := val.([]any)
			if !ok || len(alts) == 0 {
				return fmt.Errorf("%w: %s/%s must be a non-empty array", ErrBadSchema, at, k)
			}
			for i, a := range alts {
				as, err := c.compile(a, fmt.Sprintf("%s/%s/%d", at, k, i), depth+1)
				if err != nil {
					return err
				}
				s.alts = append(s.alts, as)
			}
			if nullable(obj) {
				s.alts = append(s.alts, &Schema{types: tNull, maxItems: -1, maxLen: -1})
			}
			c.unions = append(c.unions, s)
			if k == "oneOf" {
				c.oneOfs = append(c.oneOfs, oneOf{s, at})
			}
			return nil
		case "properties", "required", "additionalProperties", "items", "prefixItems", "additionalItems",
			"minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
			"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			// read below, once the type is known
		default:
			if !ignored[k] {
				return fmt.Errorf("%w: %s/%s", ErrUnsupported, at, k)
			}
		}
		if err != nil {
			return err
		}
	}
	if nullable(obj) {
		s.types |= tNull
	}
	if props, ok := obj["properties"]; ok {
		pm, ok := props.(map[string]any)
		if !ok {
			return fmt.Errorf("%w: %s/properties must be an object", ErrBadSchema, at)
		}
		if len(pm) > maxProps {
			return fmt.Errorf("%w: %s has %d properties, at most %d", ErrUnsupported, at, len(pm), maxProps)
		}
		for name, ps := range pm {
			ptr := strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
			cs, err := c.compile(ps, at+"/properties/"+ptr, depth+1)
			if err != nil {
				return err
			}
			key, _ := json.Marshal(name)
			s.props = append(s.props, prop{key: string(key), schema: cs})
		}
		sort.Slice(s.props, func(i, j int) bool { return s.props[i].key < s.props[j].key })
	}
	if req, ok := obj["required"]; ok {
		names, ok := req.([]any)
		if !ok {
			return fmt.Errorf("%w: %s/required must be an array", ErrBadSchema, at)
		}
		var keys []string
		for _, n := range names {
			name, ok := n.(string)
			if !ok {
				return fmt.Errorf("%w: %s/required holds %v", ErrBadSchema, at, n)
			}
			key, _ := json.Marshal(name)
			keys = append(keys, string(key))
			if !slices.ContainsFunc(s.props, func(p prop) bool { return p.key == string(key) }) {
				// Required without a declared schema: any value.
				s.props = append(s.props, prop{key: string(key), schema: anything})
			}
		}
		if len(s.props) > maxProps {
			return fmt.Errorf("%w: %s has more than %d properties", ErrUnsupported, at, maxProps)
		}
		sort.Slice(s.props, func(i, j int) bool { return s.props[i].key < s.props[j].key })
		for _, key := range keys {
			s.required |= 1 << slices.IndexFunc(s.props, func(p prop) bool { return p.key == key })
		}
	}
	if len(s.props) == 0 {
		s.extra = anything
		if ap, ok := obj["additionalProperties"]; ok {
			if b, isBool := ap.(bool); isBool && !b {
				s.extra, s.closed = nil, true // only {}
			} else if !isBool {
				cs, err := c.compile(ap, at+"/additionalProperties", depth+1)
				if err != nil {
					return err
				}
				s.extra = cs
			}
		}
	}
	if b, isBool := obj["additionalProperties"].(bool); isBool && !b {
		s.closed = true
	}
	// With declared properties no other key is generated: a subset of what
	// the schema allows, whatever additionalProperties says.
	// Tuples: prefixItems and then items (2020-12), or items as a list
	// and then additionalItems (drafts 4 to 7).
	tail, tailKey := obj["items"], "items"
	var prefix []any
	if pi, ok := obj["prefixItems"]; ok {
		if prefix, ok = pi.([]any); !ok {
			return fmt.Errorf("%w: %s/prefixItems must be an array", ErrBadSchema, at)
		}
		for i, ps := range prefix {
			cs, err := c.compile(ps, fmt.Sprintf("%s/prefixItems/%d", at, i), depth+1)
			if err != nil {
				return err
			}
			s.prefix = append(s.prefix, cs)
		}
	} else if list, ok := tail.([]any); ok {
		for i, ps := range list {
			cs, err := c.compile(ps, fmt.Sprintf("%s/items/%d", at, i), depth+1)
			if err != nil {
				return err
			}
			s.prefix = append(s.prefix, cs)
		}
		tail, tailKey = obj["additionalItems"], "additionalItems"
	}
	switch b, isBool := tail.(bool); {
	case tail == nil || isBool && b:
		s.items = anything
	case isBool: // no items past the prefix
	default:
		cs, err := c.compile(tail, at+"/"+tailKey, depth+1)
		if err != nil {
			return err
		}
		s.items = cs
	}
	var err error
	if s.minItems, err = count(obj, "minItems", 0, at); err != nil {
		return err
	}
	if s.maxItems, err = count(obj, "maxItems", -1, at); err != nil {
		return err
	}
	if s.minLen, err = count(obj, "minLength", 0, at); err != nil {
		return err
	}
	if s.maxLen, err = count(obj, "maxLength", -1, at); err != nil {
		return err
	}
	if s.items == nil && (s.maxItems < 0 || s.maxItems > len(s.prefix)) {
		s.maxItems = len(s.prefix)
	}
	if (s.maxItems >= 0 && s.maxItems < s.minItems) || (s.maxLen >= 0 && s.maxLen < s.minLen) {
		return fmt.Errorf("%w: %s: a maximum below its minimum", ErrBadSchema, at)
	}
	if s.types&tNumber != 0 {
		s.types |= tInteger // an integer is a number
	}
	if err := c.stringPattern(s, obj, at); err != nil {
		return err
	}
	if err := bounds(s, obj, at); err != nil {
		return err
	}
	return filterEnum(s, at)
}

// filterEnum keeps the enum values the schema's other keywords allow
// (type, bounds, pattern, length): the machine writes an enum value as it
// is. Objects and arrays are kept as they are: their parts may be schemas
// still being compiled.
func filterEnum(s *Schema, at string) error {
	if s.enum == nil {
		return nil
	}
	probe := *s
	probe.enum = nil
	keep := s.enum[:0:0]
	for _, v := range s.enum {
		if v[0] == '{' || v[0] == '[' {
			keep = append(keep, v)
			continue
		}
		if m := NewMachine(&probe); m.Feed(v) && m.CanEnd() {
			keep = append(keep, v)
		}
	}
	if len(keep) == 0 {
		return fmt.Errorf("%w: %s/enum: no value fits the schema's other keywords", ErrBadSchema, at)
	}
	s.enum = keep
	return nil
}

func nullable(obj map[string]any) bool { b, _ := obj["nullable"].(bool); return b }

// flatten replaces each union's alternatives that are unions by theirs,
// once every $ref is filled; a union that reaches itself adds nothing by
// that path.
func (c *compiler) flatten() error {
	for _, u := range c.unions {
		var out []*Schema
		seen := map[*Schema]bool{u: true}
		var walk func(s *Schema)
		walk = func(s *Schema) {
			if seen[s] {
				return
			}
			seen[s] = true
			if s.alts != nil {
				for _, a := range s.alts {
					walk(a)
				}
				return
			}
			out = append(out, s)
		}
		for _, a := range u.alts {
			walk(a)
		}
		if len(out) == 0 {
			return fmt.Errorf("%w: an anyOf whose alternatives only refer to each other", ErrBadSchema)
		}
		u.alts = out
	}
	// oneOf holds when exactly one alternative matches: the machine reads
	// it as anyOf, which is the same only for alternatives no value
	// matches two of.
	for _, o := range c.oneOfs {
		alts := o.u.alts
		if len(alts)*len(alts) > 1<<16 {
			return fmt.Errorf("%w: %s/oneOf of %d alternatives", ErrUnsupported, o.at, len(alts))
		}
		for i := range alts {
			for j := range i {
				if !disjoint(alts[i], alts[j], 0) {
					return fmt.Errorf("%w: %s/oneOf: alternatives %d and %d may match the same value "+
						"(oneOf is enforced for alternatives told apart by type, enum or const, or a required property; anyOf takes any)",
						ErrUnsupported, o.at, j, i)
				}
			}
		}
	}
	// A schema that stood for another (allOf of one) takes its place.
	for _, u := range c.unions {
		if len(u.alts) == 1 {
			*u = *u.alts[0]
		}
	}
	return nil
}

func types(v any, at string) (uint8, error) {
	var names []any
	switch v := v.(type) {
	case string:
		names = []any{v}
	case []any:
		names = v
	default:
		return 0, fmt.Errorf("%w: %s/type must be a string or an array", ErrBadSchema, at)
	}
	var bits uint8
	for _, n := range names {
		name, _ := n.(string)
		b, ok := typeBits[name]
		if !ok {
			return 0, fmt.Errorf("%w: %s/type %v", ErrBadSchema, at, n)
		}
		bits |= b
	}
	if bits == 0 {
		return 0, fmt.Errorf("%w: %s/type lists no type", ErrBadSchema, at)
	}
	return bits, nil
}

func encodings(vals []any) ([]string, error) {
	var out []string
	for _, v := range vals {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: enum value %v: %w", ErrBadSchema, v, err)
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func count(obj map[string]any, key string, def int, at string) (int, error) {
	v, ok := obj[key]
	if !ok {
		return def, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%w: %s/%s must be a number", ErrBadSchema, at, key)
	}
	i, err := n.Int64()
	if err != nil || i < 0 || i > 1<<20 {
		return 0, fmt.Errorf("%w: %s/%s = %s", ErrBadSchema, at, key, n)
	}
	return int(i), nil
}

// Bounded numbers: at most boundedFrac fraction digits, and as many
// integer digits as keep the scaled value within an int64.
const (
	boundedFrac   = 6
	boundedDigits = 18 // integer and fraction digits together
)

var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return
}()

// bounds reads minimum, maximum, exclusiveMinimum and exclusiveMaximum
// (a number, or draft 4's boolean beside minimum/maximum) into s.lo and
// s.hi, in units of 10^−s.frac.
func bounds(s *Schema, obj map[string]any, at string) error {
	num := func(k string) (*big.Rat, error) {
		v, ok := obj[k]
		if !ok {
			return nil, nil
		}
		if _, isBool := v.(bool); isBool {
			return nil, nil
		}
		n, ok := v.(json.Number)
		r, ok2 := new(big.Rat).SetString(string(n))
		if !ok || !ok2 {
			return nil, fmt.Errorf("%w: %s/%s must be a number", ErrBadSchema, at, k)
		}
		return r, nil
	}
	lo, err := num("minimum")
	if err != nil {
		return err
	}
	hi, err := num("maximum")
	if err != nil {
		return err
	}
	xlo, err := num("exclusiveMinimum")
	if err != nil {
		return err
	}
	xhi, err := num("exclusiveMaximum")
	if err != nil {
		return err
	}
	if b, _ := obj["exclusiveMinimum"].(bool); b && lo != nil {
		lo, xlo = nil, lo
	}
	if b, _ := obj["exclusiveMaximum"].(bool); b && hi != nil {
		hi, xhi = nil, hi
	}
	if lo == nil && hi == nil && xlo == nil && xhi == nil {
		return nil
	}
	s.bounded = true
	if s.types&tNumber != 0 {
		s.frac = boundedFrac
	}
	limit := pow10[min(maxIntDigits+s.frac, boundedDigits)] - 1
	scale := new(big.Int).SetInt64(pow10[s.frac])
	scaled := func(r *big.Rat, up, strict bool) int64 {
		// r·10^frac rounded up (a lower bound) or down (an upper one),
		// one unit further when the bound itself is excluded.
		x := new(big.Rat).Mul(r, new(big.Rat).SetInt(scale))
		q, m := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
		exact := m.Sign() == 0
		if up && (m.Sign() > 0 || exact && strict) {
			q.Add(q, big.NewInt(1))
		}
		if !up && (m.Sign() < 0 || exact && strict) {
			q.Sub(q, big.NewInt(1))
		}
		if q.CmpAbs(big.NewInt(limit)) > 0 {
			return int64(q.Sign()) * limit
		}
		return q.Int64()
	}
	s.lo, s.hi = -limit, limit
	for _, b := range []struct {
		r          *big.Rat
		up, strict bool
	}{{lo, true, false}, {xlo, true, true}, {hi, false, false}, {xhi, false, true}} {
		if b.r == nil {
			continue
		}
		v := scaled(b.r, b.up, b.strict)
		if b.up {
			s.lo = max(s.lo, v)
		} else {
			s.hi = min(s.hi, v)
		}
	}
	if s.lo > s.hi && s.types&(tNumber|tInteger) != 0 {
		return fmt.Errorf("%w: %s: no number between its bounds (with at most %d fraction digits)", ErrUnsupported, at, s.frac)
	}
	return nil
}

// AnyOf is a value of any of alts.
func AnyOf(alts ...*Schema) *Schema {
	var flat []*Schema
	for _, a := range alts {
		if a.alts != nil {
			flat = append(flat, a.alts...)
		} else {
			flat = append(flat, a)
		}
	}
	if len(flat) == 1 {
		return flat[0]
	}
	return &Schema{alts: flat, maxItems: -1, maxLen: -1}
}

// Call is a tool call's JSON as Qwen3's template writes it: an object of
// the function's name, then its arguments (a value of args). The name
// comes first so that, in a union of calls, the readings of the other
// functions end with it.
func Call(name string, args *Schema) *Schema { return CallKeyed(name, "arguments", args) }

// CallKeyed is Call with the arguments under argsKey: Llama 3.x writes
// {"name": …, "parameters": {…}}.
func CallKeyed(name, argsKey string, args *Schema) *Schema {
	key, _ := json.Marshal(name)
	ak, _ := json.Marshal(argsKey)
	return &Schema{types: tObject, maxItems: -1, maxLen: -1, required: 0b11, ordered: true, props: []prop{
		{key: `"name"`, schema: &Schema{types: tString, enum: []string{string(key)}, maxItems: -1, maxLen: -1}},
		{key: string(ak), schema: args},
	}}
}

// WithProp is the call object c (CallKeyed's) with one more required
// property after the others: Mistral Nemo's "id" of 9 letters and digits.
func WithProp(c *Schema, key string, v *Schema) *Schema {
	k, _ := json.Marshal(key)
	out := *c
	out.props = append(append([]prop(nil), c.props...), prop{key: string(k), schema: v})
	out.required = c.required | 1<<len(c.props)
	return &out
}

// Keyed is an object of one property, key, whose value is v: the
// {"tool_call": {…}} a template without tool tokens has the model write.
func Keyed(key string, v *Schema) *Schema {
	k, _ := json.Marshal(key)
	return &Schema{types: tObject, maxItems: -1, maxLen: -1, required: 0b1, ordered: true, props: []prop{{key: string(k), schema: v}}}
}

// Items is an array of min to max values of item (max −1: no limit).
func Items(item *Schema, min, max int) *Schema {
	return &Schema{types: tArray, items: item, minItems: min, maxItems: max, maxLen: -1}
}

// Kinds of JSON values, for disjoint.
const (
	kindObject = 1 << iota
	kindArray
	kindString
	kindNumber
	kindBool
	kindNull
)

// kinds are the kinds of the values s allows.
func kinds(s *Schema) uint8 {
	if s.enum != nil {
		var k uint8
		for _, v := range s.enum {
			k |= kindOf(v)
		}
		return k
	}
	var k uint8
	for _, m := range [][2]uint8{{tObject, kindObject}, {tArray, kindArray}, {tString, kindString},
		{tNumber | tInteger, kindNumber}, {tBoolean, kindBool}, {tNull, kindNull}} {
		if s.types&m[0] != 0 {
			k |= m[1]
		}
	}
	return k
}

func kindOf(enc string) uint8 {
	switch enc[0] {
	case '{':
		return kindObject
	case '[':
		return kindArray
	case '"':
		return kindString
	case 't', 'f':
		return kindBool
	case 'n':
		return kindNull
	}
	return kindNumber
}

// disjoint says no value validates against both a and b (false when that
// is not plain): their kinds differ, or, for each kind they share, their
// enum values differ, or (objects) a property both require is disjoint,
// or one requires a key the other, closed, does not declare.
func disjoint(a, b *Schema, depth int) bool {
	if a.alts != nil || b.alts != nil || depth > 8 {
		return false
	}
	shared := kinds(a) & kinds(b)
	for k := uint8(1); k <= kindNull; k <<= 1 {
		if shared&k == 0 {
			continue
		}
		if a.enum != nil && b.enum != nil {
			if !enumsDisjoint(a.enum, b.enum, k) {
				return false
			}
			continue
		}
		if k != kindObject || !objectsDisjoint(a, b, depth) {
			return false
		}
	}
	return true
}

func enumsDisjoint(a, b []string, kind uint8) bool {
	for _, x := range a {
		if kindOf(x) != kind {
			continue
		}
		for _, y := range b {
			if kindOf(y) != kind {
				continue
			}
			if x == y {
				return false
			}
			if kind == kindNumber {
				rx, ok1 := new(big.Rat).SetString(x)
				ry, ok2 := new(big.Rat).SetString(y)
				if !ok1 || !ok2 || rx.Cmp(ry) == 0 {
					return false
				}
			}
			if kind == kindObject || kind == kindArray {
				return false // the same value may be written two ways
			}
		}
	}
	return true
}

func objectsDisjoint(a, b *Schema, depth int) bool {
	for i, pa := range a.props {
		for j, pb := range b.props {
			if pa.key == pb.key && a.required&(1<<i) != 0 && b.required&(1<<j) != 0 && disjoint(pa.schema, pb.schema, depth+1) {
				return true
			}
		}
	}
	// A key one requires that the other, closed, does not declare.
	requiresUndeclared := func(x, y *Schema) bool {
		if !y.closed {
			return false
		}
		for i, px := range x.props {
			if x.required&(1<<i) != 0 && !slices.ContainsFunc(y.props, func(p prop) bool { return p.key == px.key }) {
				return true
			}
		}
		return false
	}
	return requiresUndeclared(a, b) || requiresUndeclared(b, a)
}
