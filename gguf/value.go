package gguf

import (
	"fmt"
	"math"
	"strings"
)

// ValueType is the type of a metadata value, numbered as in the GGUF spec.
type ValueType uint32

// Metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("valuetype(%d)", uint32(t))
}

// fixedSize is the encoded size of a scalar of fixed width, 0 otherwise.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minEncodedSize is the fewest bytes one value of type t can occupy, used to
// bound array counts by the bytes left in the file.
func (t ValueType) minEncodedSize() int {
	switch t {
	case TypeString:
		return 8 // length
	case TypeArray:
		return 12 // element type + count
	}
	return t.fixedSize()
}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

// Value is one metadata value. Scalars hold the Go type of the same width
// (uint8 … int64, float32, float64, bool, string). Arrays hold a typed slice
// ([]uint8 … []float64, []bool, []string), or []Value when the elements are
// themselves arrays.
type Value struct {
	Type ValueType // scalar type, or TypeArray
	Elem ValueType // element type when Type is TypeArray
	data any
}

// Any returns the value as its Go type (see Value).
func (v Value) Any() any { return v.data }

// Len is the number of elements of an array value, 0 for a scalar.
func (v Value) Len() int {
	switch s := v.data.(type) {
	case []uint8:
		return len(s)
	case []int8:
		return len(s)
	case []uint16:
		return len(s)
	case []int16:
		return len(s)
	case []uint32:
		return len(s)
	case []int32:
		return len(s)
	case []uint64:
		return len(s)
	case []int64:
		return len(s)
	case []float32:
		return len(s)
	case []float64:
		return len(s)
	case []bool:
		return len(s)
	case []string:
		return len(s)
	case []Value:
		return len(s)
	}
	return 0
}

// String renders the value for people, eliding the middle of long arrays.
func (v Value) String() string {
	if v.Type != TypeArray {
		if s, ok := v.data.(string); ok {
			return fmt.Sprintf("%q", s)
		}
		return fmt.Sprint(v.data)
	}
	const show = 6
	n := v.Len()
	parts := make([]string, 0, min(n, show)+1)
	for i := 0; i < n; i++ {
		if n > show && i == show/2 {
			parts = append(parts, fmt.Sprintf("... %d more ...", n-show))
			i = n - show/2 - 1
			continue
		}
		parts = append(parts, v.index(i).String())
	}
	return fmt.Sprintf("[%s] %s", v.Elem, "["+strings.Join(parts, ", ")+"]")
}

// index returns element i of an array value as a Value.
func (v Value) index(i int) Value {
	e := Value{Type: v.Elem}
	switch s := v.data.(type) {
	case []uint8:
		e.data = s[i]
	case []int8:
		e.data = s[i]
	case []uint16:
		e.data = s[i]
	case []int16:
		e.data = s[i]
	case []uint32:
		e.data = s[i]
	case []int32:
		e.data = s[i]
	case []uint64:
		e.data = s[i]
	case []int64:
		e.data = s[i]
	case []float32:
		e.data = s[i]
	case []float64:
		e.data = s[i]
	case []bool:
		e.data = s[i]
	case []string:
		e.data = s[i]
	case []Value:
		return s[i]
	}
	return e
}

// asInt64 converts any integer scalar; ok is false for non-integers and for
// uint64 values above MaxInt64.
func asInt64(x any) (int64, bool) {
	switch n := x.(type) {
	case uint8:
		return int64(n), true
	case int8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case int16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// Metadata is the key–value section of a file, in file order.
type Metadata struct {
	keys   []string
	values map[string]Value
}

func (m *Metadata) set(key string, v Value) {
	if m.values == nil {
		m.values = map[string]Value{}
	}
	if _, ok := m.values[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.values[key] = v
}

// Keys returns the keys in file order.
func (m Metadata) Keys() []string { return append([]string(nil), m.keys...) }

// Len is the number of keys.
func (m Metadata) Len() int { return len(m.keys) }

// Get returns the value of key.
func (m Metadata) Get(key string) (Value, bool) {
	v, ok := m.values[key]
	return v, ok
}

// String returns a string value.
func (m Metadata) String(key string) (string, bool) {
	s, ok := m.values[key].data.(string)
	return s, ok
}

// Uint returns a non-negative integer value of any integer type.
func (m Metadata) Uint(key string) (uint64, bool) {
	switch n := m.values[key].data.(type) {
	case uint64:
		return n, true
	default:
		i, ok := asInt64(n)
		if !ok || i < 0 {
			return 0, false
		}
		return uint64(i), true
	}
}

// Int returns an integer value of any integer type that fits in int64.
func (m Metadata) Int(key string) (int64, bool) { return asInt64(m.values[key].data) }

// Float returns a float32 or float64 value as float64.
func (m Metadata) Float(key string) (float64, bool) {
	switch f := m.values[key].data.(type) {
	case float32:
		return float64(f), true
	case float64:
		return f, true
	}
	return 0, false
}

// Bool returns a bool value.
func (m Metadata) Bool(key string) (bool, bool) {
	b, ok := m.values[key].data.(bool)
	return b, ok
}

// Strings returns an array of strings. The slice is shared: do not modify.
func (m Metadata) Strings(key string) ([]string, bool) {
	s, ok := m.values[key].data.([]string)
	return s, ok
}

// Int32s returns an integer array whose elements all fit in int32 (token
// types are int32 in llama.cpp's files, but writers vary). An int32 array is
// returned shared: do not modify.
func (m Metadata) Int32s(key string) ([]int32, bool) {
	v, ok := m.values[key]
	if !ok || v.Type != TypeArray {
		return nil, false
	}
	if s, ok := v.data.([]int32); ok {
		return s, true
	}
	n := v.Len()
	out := make([]int32, n)
	for i := range n {
		x, ok := asInt64(v.index(i).data)
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

// Float32s returns a float32 array (a float64 array is converted). A
// float32 array is returned shared: do not modify.
func (m Metadata) Float32s(key string) ([]float32, bool) {
	switch s := m.values[key].data.(type) {
	case []float32:
		return s, true
	case []float64:
		out := make([]float32, len(s))
		for i, f := range s {
			out[i] = float32(f)
		}
		return out, true
	}
	return nil, false
}

// Require returns the value of key, or an error wrapping ErrNoKey.
func (m Metadata) Require(key string) (Value, error) {
	v, ok := m.values[key]
	if !ok {
		return Value{}, fmt.Errorf("gguf: metadata key %q: %w", key, ErrNoKey)
	}
	return v, nil
}

// RequireUint is Uint with an error naming the key when it is missing
// (ErrNoKey) or not a non-negative integer (ErrKeyType).
func (m Metadata) RequireUint(key string) (uint64, error) {
	v, err := m.Require(key)
	if err != nil {
		return 0, err
	}
	n, ok := m.Uint(key)
	if !ok {
		return 0, fmt.Errorf("gguf: metadata key %q = %v (%s): want a non-negative integer: %w", key, v, v.Type, ErrKeyType)
	}
	return n, nil
}

// RequireFloat is Float with an error naming the key (ErrNoKey, ErrKeyType).
func (m Metadata) RequireFloat(key string) (float64, error) {
	v, err := m.Require(key)
	if err != nil {
		return 0, err
	}
	f, ok := m.Float(key)
	if !ok {
		return 0, fmt.Errorf("gguf: metadata key %q = %v (%s): want a float: %w", key, v, v.Type, ErrKeyType)
	}
	return f, nil
}

// RequireString is String with an error naming the key (ErrNoKey,
// ErrKeyType).
func (m Metadata) RequireString(key string) (string, error) {
	v, err := m.Require(key)
	if err != nil {
		return "", err
	}
	s, ok := m.String(key)
	if !ok {
		return "", fmt.Errorf("gguf: metadata key %q = %v (%s): want a string: %w", key, v, v.Type, ErrKeyType)
	}
	return s, nil
}
