package grammar

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"unicode/utf8"
)

// validate is a JSON Schema validator of the keywords Compile reads,
// written from the specification apart from the machine: what the tests
// hold the machine's texts to.
func validate(root, s any, v any) error {
	if b, ok := s.(bool); ok {
		if !b {
			return fmt.Errorf("false schema")
		}
		return nil
	}
	obj := s.(map[string]any)
	if ref, ok := obj["$ref"].(string); ok {
		t, err := resolve(root, strings.TrimPrefix(ref, "#"))
		if err != nil {
			return err
		}
		return validate(root, t, v)
	}
	if all, ok := obj["allOf"].([]any); ok {
		for _, a := range all {
			if err := validate(root, a, v); err != nil {
				return err
			}
		}
	}
	if alts, ok := obj["anyOf"].([]any); ok {
		ok := false
		for _, a := range alts {
			ok = ok || validate(root, a, v) == nil
		}
		if !ok && !(obj["nullable"] == true && v == nil) {
			return fmt.Errorf("no anyOf alternative matches %v", v)
		}
	}
	if alts, ok := obj["oneOf"].([]any); ok {
		n := 0
		for _, a := range alts {
			if validate(root, a, v) == nil {
				n++
			}
		}
		if n != 1 && !(obj["nullable"] == true && v == nil) {
			return fmt.Errorf("%d oneOf alternatives match %v", n, v)
		}
	}
	if t, ok := obj["type"]; ok {
		names, _ := t.([]any)
		if n, ok := t.(string); ok {
			names = []any{n}
		}
		if obj["nullable"] == true {
			names = append(names, "null")
		}
		match := false
		for _, n := range names {
			match = match || hasType(n.(string), v)
		}
		if !match {
			return fmt.Errorf("%v is not of type %v", v, t)
		}
	}
	enc, _ := json.Marshal(v)
	if e, ok := obj["enum"].([]any); ok {
		found := false
		for _, x := range e {
			xb, _ := json.Marshal(x)
			found = found || string(xb) == string(enc)
		}
		if !found {
			return fmt.Errorf("%s not in enum", enc)
		}
	}
	if c, ok := obj["const"]; ok {
		cb, _ := json.Marshal(c)
		if string(cb) != string(enc) {
			return fmt.Errorf("%s is not the const", enc)
		}
	}
	num := func(k string) *big.Rat {
		n, ok := obj[k].(json.Number)
		if !ok {
			return nil
		}
		r, _ := new(big.Rat).SetString(string(n))
		return r
	}
	switch x := v.(type) {
	case json.Number:
		r, _ := new(big.Rat).SetString(string(x))
		if b := num("minimum"); b != nil && r.Cmp(b) < 0 {
			return fmt.Errorf("%s below minimum", x)
		}
		if b := num("maximum"); b != nil && r.Cmp(b) > 0 {
			return fmt.Errorf("%s above maximum", x)
		}
		if b := num("exclusiveMinimum"); b != nil && r.Cmp(b) <= 0 {
			return fmt.Errorf("%s not above exclusiveMinimum", x)
		}
		if b := num("exclusiveMaximum"); b != nil && r.Cmp(b) >= 0 {
			return fmt.Errorf("%s not below exclusiveMaximum", x)
		}
	case string:
		n := utf8.RuneCountInString(x)
		if m, ok := obj["minLength"].(json.Number); ok && int64(n) < must(m) {
			return fmt.Errorf("%q too short", x)
		}
		if m, ok := obj["maxLength"].(json.Number); ok && int64(n) > must(m) {
			return fmt.Errorf("%q too long", x)
		}
		if p, ok := obj["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(x) {
			return fmt.Errorf("%q does not match %s", x, p)
		}
		if f, ok := obj["format"].(string); ok && formats[f] != "" && !regexp.MustCompile(formats[f]).MatchString(x) {
			return fmt.Errorf("%q is not a %s", x, f)
		}
	case []any:
		if m, ok := obj["minItems"].(json.Number); ok && int64(len(x)) < must(m) {
			return fmt.Errorf("too few items")
		}
		if m, ok := obj["maxItems"].(json.Number); ok && int64(len(x)) > must(m) {
			return fmt.Errorf("too many items")
		}
		prefix := asList(obj["prefixItems"])
		for i, e := range x {
			it, ok := obj["items"]
			if i < len(prefix) {
				it, ok = prefix[i], true
			}
			if !ok {
				continue
			}
			if err := validate(root, it, e); err != nil {
				return err
			}
		}
	case map[string]any:
		props, _ := obj["properties"].(map[string]any)
		for _, r := range asList(obj["required"]) {
			if _, ok := x[r.(string)]; !ok {
				return fmt.Errorf("%q missing", r)
			}
		}
		for k, e := range x {
			ps, ok := props[k]
			if !ok {
				ap, has := obj["additionalProperties"]
				if !has {
					continue
				}
				ps = ap
			}
			if err := validate(root, ps, e); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

func must(n json.Number) int64 { i, _ := n.Int64(); return i }

func hasType(name string, v any) bool {
	switch x := v.(type) {
	case nil:
		return name == "null"
	case bool:
		return name == "boolean"
	case string:
		return name == "string"
	case []any:
		return name == "array"
	case map[string]any:
		return name == "object"
	case json.Number:
		if name == "number" {
			return true
		}
		r, _ := new(big.Rat).SetString(string(x))
		return name == "integer" && r.IsInt()
	}
	return false
}
