package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// errTooLarge: a value too large or deep to write as JSON.
var errTooLarge = errors.New("value too large")

// jsonStyle is json.dumps's layout: indent (-1: none), sort_keys, and the
// separators after an item and after a key.
type jsonStyle struct {
	indent    int
	sortKeys  bool
	item, key string
}

// writeJSON writes v as transformers' tojson does (Python's json.dumps with
// ensure_ascii off): ", " and ": " between items by default, or "," and ": "
// with an indent, non-ASCII characters as themselves.
func writeJSON(b *strings.Builder, v Value, st jsonStyle, depth, limit int) error {
	indent, sortKeys := st.indent, st.sortKeys
	if depth > 64 {
		return fmt.Errorf("%w: nested too deeply", errTooLarge)
	}
	if b.Len() > limit {
		return errTooLarge
	}
	nl := func(d int) {
		if indent >= 0 {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", indent*d))
		}
	}
	sep := st.item
	switch x := v.(type) {
	case nil, Undefined:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloat(x))
		}
	case Str:
		jsonString(b, x.S)
	case *List:
		if len(x.Items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range x.Items {
			if i > 0 {
				b.WriteString(sep)
			}
			nl(depth + 1)
			if err := writeJSON(b, it, st, depth+1, limit); err != nil {
				return err
			}
		}
		nl(depth)
		b.WriteByte(']')
	case *Dict, *Namespace:
		d, ok := x.(*Dict)
		if !ok {
			d = x.(*Namespace).d
		}
		if d.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := d.keys
		if sortKeys {
			keys = append([]string{}, keys...)
			sort.Strings(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(sep)
			}
			nl(depth + 1)
			jsonString(b, k)
			b.WriteString(st.key)
			if err := writeJSON(b, d.m[k], st, depth+1, limit); err != nil {
				return err
			}
		}
		nl(depth)
		b.WriteByte('}')
	default:
		return fmt.Errorf("%s is not JSON serializable", typeName(v))
	}
	return nil
}

func jsonString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// FromGo converts Go values to template values: strings become template
// text (wrap caller data with Data first), maps become dicts with sorted
// keys (pass a *Dict to keep an order), slices lists; json.RawMessage is
// decoded as data (see FromJSON). Other types are undefined.
func FromGo(v any) Value {
	switch x := v.(type) {
	case nil:
		return nil
	case Str, *List, *Dict, *Namespace, Undefined, bool, int64, float64:
		return x
	case string:
		return Text(x)
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case float32:
		return float64(x)
	case json.RawMessage:
		if j, err := FromJSON(x, true); err == nil {
			return j
		}
		return Data(string(x))
	case []any:
		l := &List{Items: make([]Value, len(x))}
		for i, e := range x {
			l.Items[i] = FromGo(e)
		}
		return l
	case []string:
		l := &List{Items: make([]Value, len(x))}
		for i, e := range x {
			l.Items[i] = Text(e)
		}
		return l
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := NewDict()
		for _, k := range keys {
			d.Set(k, FromGo(x[k]))
		}
		return d
	}
	return Undefined{}
}

// FromJSON decodes JSON keeping objects' key order; with data set, its
// strings are caller data (they stay plain text in the output).
func FromJSON(raw []byte, data bool) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSON(dec, data, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder, data bool, depth int) (Value, error) {
	if depth > 64 {
		return nil, errors.New("JSON nested too deeply")
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	str := func(s string) Str {
		if data {
			return Data(s)
		}
		return Text(s)
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '[':
			l := &List{}
			for dec.More() {
				v, err := decodeJSON(dec, data, depth+1)
				if err != nil {
					return nil, err
				}
				l.Items = append(l.Items, v)
			}
			_, err := dec.Token()
			return l, err
		case '{':
			d := NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeJSON(dec, data, depth+1)
				if err != nil {
					return nil, err
				}
				d.Set(k, v)
			}
			_, err := dec.Token()
			return d, err
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case string:
		return str(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		return f, err
	case bool:
		return x, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", t)
}

// strftime formats t with C's strftime directives that chat templates use.
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case '-':
			if i+1 < len(f) && f[i+1] == 'd' {
				i++
				fmt.Fprintf(&b, "%d", t.Day())
			}
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&b, "%02d", h)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'Z':
			b.WriteString(t.Format("MST"))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}
