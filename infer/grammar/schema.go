// Package grammar constrains generation to JSON that validates against a
// schema: a byte-level pushdown recognizer of the schema's JSON (Machine)
// and, over a tokenizer's vocabulary, the mask of the tokens whose bytes
// it accepts next (Constraint). Sampling only from allowed tokens makes the
// reply parse and validate by construction, whatever the model prefers.
//
// The schema subset is what structured-output clients send: type (one or
// a list), enum, const, properties, required, additionalProperties,
// items, minItems, maxItems, minLength, maxLength. Keywords that would
// constrain beyond that (anyOf, $ref, pattern, minimum, …) are refused
// with ErrUnsupported rather than ignored, so that a reply never fails a
// validator the client runs. Annotations (title, description, format,
// default, examples, $schema) are ignored.
package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
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
	// Objects: declared properties (keys as JSON strings, quotes included),
	// sorted by key; required as a bit per property. Without declared
	// properties any key is allowed, its value validated by extra.
	props    []prop
	required uint64
	extra    *Schema
	// Arrays.
	items              *Schema
	minItems, maxItems int // maxItems −1: no limit
	// Strings, in characters.
	minLen, maxLen int // maxLen −1: no limit
}

type prop struct {
	key    string
	schema *Schema
}

// maxProps is how many declared properties an object may have (a bit
// each in a uint64).
const maxProps = 64

// anything allows every JSON value.
var anything = &Schema{types: tAny, maxItems: -1, maxLen: -1}

func init() { anything.items, anything.extra = anything, anything }

// AnyObject is the schema of response_format json_object: any JSON object.
func AnyObject() *Schema {
	return &Schema{types: tObject, extra: anything, maxItems: -1, maxLen: -1}
}

var ignored = map[string]bool{
	"title": true, "description": true, "format": true, "default": true, "examples": true,
	"$schema": true, "$id": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"strict": true,
}

// Compile reads a JSON schema.
func Compile(raw []byte) (*Schema, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	values := 0
	return compile(v, "#", &values)
}

// MaxEnumValues bounds the enum and const values of one schema, all its
// parts together. A mask's cost grows with the log of an enum's size, but
// compiling and holding the values grows with their number; no
// structured-output schema in use comes near this.
const MaxEnumValues = 16384

func compile(v any, at string, values *int) (*Schema, error) {
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
	s := &Schema{types: tAny, maxItems: -1, maxLen: -1}
	for k, val := range obj {
		var err error
		switch k {
		case "type":
			s.types, err = types(val, at)
		case "enum":
			vals, ok := val.([]any)
			if !ok || len(vals) == 0 {
				return nil, fmt.Errorf("%w: %s/enum must be a non-empty array", ErrBadSchema, at)
			}
			if *values += len(vals); *values > MaxEnumValues {
				return nil, fmt.Errorf("%w: %s/enum: the schema has more than %d enum values", ErrUnsupported, at, MaxEnumValues)
			}
			s.enum, err = encodings(vals)
		case "const":
			*values++
			s.enum, err = encodings([]any{val})
		case "properties", "required", "additionalProperties", "items",
			"minItems", "maxItems", "minLength", "maxLength":
			// read below, once the type is known
		default:
			if !ignored[k] {
				return nil, fmt.Errorf("%w: %s/%s", ErrUnsupported, at, k)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if props, ok := obj["properties"]; ok {
		pm, ok := props.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: %s/properties must be an object", ErrBadSchema, at)
		}
		if len(pm) > maxProps {
			return nil, fmt.Errorf("%w: %s has %d properties, at most %d", ErrUnsupported, at, len(pm), maxProps)
		}
		for name, ps := range pm {
			c, err := compile(ps, at+"/properties/"+name, values)
			if err != nil {
				return nil, err
			}
			key, _ := json.Marshal(name)
			s.props = append(s.props, prop{key: string(key), schema: c})
		}
		sort.Slice(s.props, func(i, j int) bool { return s.props[i].key < s.props[j].key })
	}
	if req, ok := obj["required"]; ok {
		names, ok := req.([]any)
		if !ok {
			return nil, fmt.Errorf("%w: %s/required must be an array", ErrBadSchema, at)
		}
		var keys []string
		for _, n := range names {
			name, ok := n.(string)
			if !ok {
				return nil, fmt.Errorf("%w: %s/required holds %v", ErrBadSchema, at, n)
			}
			key, _ := json.Marshal(name)
			keys = append(keys, string(key))
			if !slices.ContainsFunc(s.props, func(p prop) bool { return p.key == string(key) }) {
				// Required without a declared schema: any value.
				s.props = append(s.props, prop{key: string(key), schema: anything})
			}
		}
		if len(s.props) > maxProps {
			return nil, fmt.Errorf("%w: %s has more than %d properties", ErrUnsupported, at, maxProps)
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
				s.extra = nil // only {}
			} else if !isBool {
				c, err := compile(ap, at+"/additionalProperties", values)
				if err != nil {
					return nil, err
				}
				s.extra = c
			}
		}
	}
	// With declared properties no other key is generated: a subset of what
	// the schema allows, whatever additionalProperties says.
	if it, ok := obj["items"]; ok {
		c, err := compile(it, at+"/items", values)
		if err != nil {
			return nil, err
		}
		s.items = c
	} else {
		s.items = anything
	}
	var err error
	if s.minItems, err = count(obj, "minItems", 0, at); err != nil {
		return nil, err
	}
	if s.maxItems, err = count(obj, "maxItems", -1, at); err != nil {
		return nil, err
	}
	if s.minLen, err = count(obj, "minLength", 0, at); err != nil {
		return nil, err
	}
	if s.maxLen, err = count(obj, "maxLength", -1, at); err != nil {
		return nil, err
	}
	if (s.maxItems >= 0 && s.maxItems < s.minItems) || (s.maxLen >= 0 && s.maxLen < s.minLen) {
		return nil, fmt.Errorf("%w: %s: a maximum below its minimum", ErrBadSchema, at)
	}
	if s.types&tNumber != 0 {
		s.types |= tInteger // an integer is a number
	}
	return s, nil
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
