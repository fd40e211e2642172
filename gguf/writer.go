package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
)

// Writer builds a GGUF v3 file: metadata in the order set, then tensor infos
// and data in the order added. Tensor data is referenced, not copied, until
// WriteTo.
type Writer struct {
	kv        Metadata
	tensors   []writerTensor
	names     map[string]bool
	err       error // first Set error, reported by WriteTo
	alignment int64
}

type writerTensor struct {
	info TensorInfo
	data []byte
}

// NewWriter returns an empty writer (alignment 32 unless general.alignment
// is set).
func NewWriter() *Writer {
	return &Writer{names: map[string]bool{}, alignment: DefaultAlignment}
}

// Set adds or replaces a metadata key. v is a Go value of a GGUF type
// (uint8 … int64, float32, float64, bool, string), a slice of those, a slice
// of slices for arrays of arrays, or a Value read from another file. An
// unsupported value is reported by WriteTo. llama.cpp reads everything but
// arrays of arrays.
func (w *Writer) Set(key string, v any) {
	if key == "" {
		w.fail(fmt.Errorf("gguf: empty metadata key: %w", ErrCorrupt))
		return
	}
	val, err := toValue(v, 0)
	if err != nil {
		w.fail(fmt.Errorf("gguf: metadata key %q: %w", key, err))
		return
	}
	if key == KeyAlignment {
		a, ok := asInt64(val.data)
		if !ok || val.Type != TypeUint32 || a == 0 || a&(a-1) != 0 || a > 1<<30 {
			w.fail(fmt.Errorf("gguf: %s must be a uint32 power of two up to 2^30, got %v", KeyAlignment, v))
			return
		}
		w.alignment = a
	}
	w.kv.set(key, val)
}

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// AddTensor appends a tensor. shape is ne0 first; data must be exactly the
// tensor's size and must not change until the file is written. Q2_0G128 is
// stored under id 42, the legacy way.
func (w *Writer) AddTensor(name string, t Type, shape []int64, data []byte) error {
	if name == "" || len(name) >= MaxNameLen {
		return fmt.Errorf("gguf: tensor name %q: want 1 to %d bytes (llama.cpp's limit): %w", name, MaxNameLen-1, ErrCorrupt)
	}
	if w.names[name] {
		return fmt.Errorf("gguf: tensor %q added twice: %w", name, ErrCorrupt)
	}
	if !t.Known() {
		return fmt.Errorf("gguf: tensor %q: %w: %d", name, ErrUnknownType, uint32(t))
	}
	if len(shape) == 0 || len(shape) > MaxDims {
		return fmt.Errorf("gguf: tensor %q has %d dimensions, want 1 to %d: %w", name, len(shape), MaxDims, ErrShape)
	}
	rows := int64(1)
	for _, d := range shape[1:] {
		if d < 0 || (d != 0 && rows > math.MaxInt64/d) {
			return fmt.Errorf("gguf: tensor %q: shape %v: %w", name, shape, ErrShape)
		}
		rows *= d
	}
	size, err := tensorBytes(t, shape[0], rows)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q %v of %s: %w", name, shape, t, err)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("gguf: tensor %q %v of %s needs %d bytes, got %d: %w", name, shape, t, size, len(data), ErrShape)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, writerTensor{
		info: TensorInfo{Name: name, Shape: append([]int64(nil), shape...), Type: t, Size: size},
		data: data,
	})
	return nil
}

// WriteTo writes the file.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	cw := &countingWriter{w: out}
	bw := bufio.NewWriterSize(cw, 1<<16)
	e := encoder{w: bw}
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(w.kv.Len()))
	for _, k := range w.kv.keys {
		e.str(k)
		v := w.kv.values[k]
		e.u32(uint32(v.Type))
		e.value(v)
	}
	var offset int64
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = offset
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(uint64(d))
		}
		e.u32(uint32(t.Type.diskID()))
		e.u64(uint64(offset))
		offset = alignUp(offset+t.Size, w.alignment)
	}
	if len(w.tensors) > 0 {
		e.pad(w.alignment)
		for _, t := range w.tensors {
			e.raw(t.data)
			e.pad(w.alignment)
		}
	}
	if e.err == nil {
		e.err = bw.Flush()
	}
	if e.err != nil {
		return cw.n, fmt.Errorf("gguf: writing: %w", e.err)
	}
	return cw.n, nil
}

// WriteFile writes the file atomically: to a temporary file in the same
// directory, synced, then renamed over path.
func (w *Writer) WriteFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = w.WriteTo(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// encoder writes little-endian GGUF structures, remembering the first error.
type encoder struct {
	w   *bufio.Writer
	n   int64
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	_, e.err = e.w.Write(b)
	e.n += int64(len(b))
}

func (e *encoder) u8(x uint8) { e.buf[0] = x; e.raw(e.buf[:1]) }
func (e *encoder) u16(x uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], x)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(x uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], x)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(x uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], x)
	e.raw(e.buf[:8])
}
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.raw([]byte(s)) }

func (e *encoder) pad(a int64) {
	var zeros [64]byte
	for n := alignUp(e.n, a) - e.n; n > 0; {
		k := min(n, int64(len(zeros)))
		e.raw(zeros[:k])
		n -= k
	}
}

func (e *encoder) value(v Value) {
	switch x := v.data.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	default: // an array
		e.u32(uint32(v.Elem))
		n := v.Len()
		e.u64(uint64(n))
		for i := range n {
			e.value(v.index(i))
		}
	}
}

var errUnsupported = errors.New("unsupported metadata value type")

// toValue converts a Go value to a metadata Value.
func toValue(v any, depth int) (Value, error) {
	switch x := v.(type) {
	case Value:
		if x.data == nil {
			return Value{}, errUnsupported
		}
		return x, nil
	case uint8:
		return Value{Type: TypeUint8, data: x}, nil
	case int8:
		return Value{Type: TypeInt8, data: x}, nil
	case uint16:
		return Value{Type: TypeUint16, data: x}, nil
	case int16:
		return Value{Type: TypeInt16, data: x}, nil
	case uint32:
		return Value{Type: TypeUint32, data: x}, nil
	case int32:
		return Value{Type: TypeInt32, data: x}, nil
	case uint64:
		return Value{Type: TypeUint64, data: x}, nil
	case int64:
		return Value{Type: TypeInt64, data: x}, nil
	case float32:
		return Value{Type: TypeFloat32, data: x}, nil
	case float64:
		return Value{Type: TypeFloat64, data: x}, nil
	case bool:
		return Value{Type: TypeBool, data: x}, nil
	case string:
		return Value{Type: TypeString, data: x}, nil
	case []uint8:
		return array(TypeUint8, x), nil
	case []int8:
		return array(TypeInt8, x), nil
	case []uint16:
		return array(TypeUint16, x), nil
	case []int16:
		return array(TypeInt16, x), nil
	case []uint32:
		return array(TypeUint32, x), nil
	case []int32:
		return array(TypeInt32, x), nil
	case []uint64:
		return array(TypeUint64, x), nil
	case []int64:
		return array(TypeInt64, x), nil
	case []float32:
		return array(TypeFloat32, x), nil
	case []float64:
		return array(TypeFloat64, x), nil
	case []bool:
		return array(TypeBool, x), nil
	case []string:
		return array(TypeString, x), nil
	}
	// Arrays of arrays: []Value of arrays, or a slice of slices whose
	// element type converts (checked on the type, so empty slices of a bad
	// type are rejected too).
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Slice || depth >= maxArrayDepth {
		return Value{}, fmt.Errorf("%w: %T (want a sized number such as uint32, a bool, a string, or slices of those)", errUnsupported, v)
	}
	if et := rv.Type().Elem(); et != reflect.TypeOf(Value{}) {
		if et.Kind() != reflect.Slice {
			return Value{}, fmt.Errorf("%w: %T", errUnsupported, v)
		}
		if _, err := toValue(reflect.Zero(et).Interface(), depth+1); err != nil {
			return Value{}, err
		}
	}
	elems := make([]Value, rv.Len())
	for i := range elems {
		e, err := toValue(rv.Index(i).Interface(), depth+1)
		if err != nil {
			return Value{}, err
		}
		if e.Type != TypeArray {
			return Value{}, fmt.Errorf("%w: %T", errUnsupported, v)
		}
		elems[i] = e
	}
	return Value{Type: TypeArray, Elem: TypeArray, data: elems}, nil
}

func array[T any](elem ValueType, s []T) Value {
	return Value{Type: TypeArray, Elem: elem, data: append(make([]T, 0, len(s)), s...)}
}
