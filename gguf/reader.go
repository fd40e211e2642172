package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the tensor data alignment when general.alignment is
// absent.
const DefaultAlignment = 32

// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
const MaxDims = 4

// MaxNameLen bounds tensor names in files the Writer makes: llama.cpp
// (GGML_MAX_NAME) refuses names of this many bytes or more. The reader
// accepts longer ones.
const MaxNameLen = 64

// maxArrayDepth bounds arrays of arrays so a hostile file cannot recurse
// deeply.
const maxArrayDepth = 8

// KeyAlignment is the metadata key that sets the tensor data alignment.
const KeyAlignment = "general.alignment"

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name   string
	Shape  []int64 // ne0 (the contiguous row length) first, as stored
	Type   Type
	Offset int64 // from the start of the data section, a multiple of the alignment
	Size   int64 // bytes
}

// Elements is the number of elements (the product of the shape).
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Rows is the number of rows of Shape[0] elements (the product of the other
// dimensions; 1 for a vector).
func (t *TensorInfo) Rows() int64 {
	n := int64(1)
	for _, d := range t.Shape[min(1, len(t.Shape)):] {
		n *= d
	}
	return n
}

// RowBytes is the size of one row in bytes.
func (t *TensorInfo) RowBytes() int64 {
	if len(t.Shape) == 0 {
		return t.Size
	}
	n, _ := t.Type.RowBytes(t.Shape[0])
	return n
}

// File is a parsed GGUF file. Tensor data stays in the mapped (or given)
// bytes; Data returns views of it.
type File struct {
	Version    uint32
	Alignment  int64
	KV         Metadata
	Tensors    []TensorInfo
	DataOffset int64 // where the tensor data section starts in the file (past the end when there are no tensors)
	Path       string

	data   []byte // the whole file
	byName map[string]int
	unmap  func() error
}

// Tensor looks a tensor up by name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Data returns the bytes of a tensor of this file: a read-only view of the
// mapping, valid until Close. It returns nil after Close or for a tensor
// whose range is not inside the file.
func (f *File) Data(t *TensorInfo) []byte {
	if t == nil || f.data == nil {
		return nil
	}
	start := f.DataOffset + t.Offset
	if t.Offset < 0 || t.Size < 0 || start < f.DataOffset || start > int64(len(f.data)) || t.Size > int64(len(f.data))-start {
		return nil
	}
	return f.data[start : start+t.Size : start+t.Size]
}

// Bytes returns the whole file (the mapping), valid until Close.
func (f *File) Bytes() []byte { return f.data }

// Close releases the mapping; Data returns nil afterwards. Closing twice is
// harmless.
func (f *File) Close() error {
	f.data = nil
	if f.unmap == nil {
		return nil
	}
	unmap := f.unmap
	f.unmap = nil
	return unmap()
}

// Parse reads a GGUF file held in memory. The File refers to data, which
// must not change while it is in use.
func Parse(data []byte) (*File, error) {
	f, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return f, nil
}

func parse(data []byte) (*File, error) {
	d := &decoder{buf: data}
	magic, err := d.take(4, "magic")
	if err != nil {
		return nil, fmt.Errorf("%d-byte file: %w", len(data), ErrNotGGUF)
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("magic %q: %w", magic, ErrNotGGUF)
	}
	version, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, fmt.Errorf("version 1 files are not supported: %w", ErrVersion)
	case version == 0:
		return nil, fmt.Errorf("version 0 is not a GGUF version: %w", ErrVersion)
	case version&0xFFFF == 0 && bits.ReverseBytes32(version) <= 3:
		return nil, fmt.Errorf("version %d looks byte-swapped (big-endian file): %w", bits.ReverseBytes32(version), ErrVersion)
	default:
		return nil, fmt.Errorf("version %d: %w", version, ErrVersion)
	}
	f := &File{Version: version, Alignment: DefaultAlignment, data: data}

	nTensors, err := d.count("tensor count", 24)
	if err != nil {
		return nil, err
	}
	nKV, err := d.count("metadata count", 13)
	if err != nil {
		return nil, err
	}

	for i := range nKV {
		key, err := d.str(fmt.Sprintf("key of metadata entry %d", i))
		if err != nil {
			return nil, err
		}
		if key == "" {
			return nil, fmt.Errorf("metadata entry %d has an empty key: %w", i, ErrCorrupt)
		}
		if _, dup := f.KV.values[key]; dup {
			return nil, fmt.Errorf("metadata key %q appears twice: %w", key, ErrCorrupt)
		}
		vt, err := d.u32(fmt.Sprintf("type of key %q", key))
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(vt), 0)
		if err != nil {
			return nil, fmt.Errorf("metadata key %q: %w", key, err)
		}
		f.KV.set(key, v)
	}
	if _, ok := f.KV.Get(KeyAlignment); ok {
		a, ok := f.KV.Uint(KeyAlignment)
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<30 {
			v, _ := f.KV.Get(KeyAlignment)
			return nil, fmt.Errorf("%s = %v: not a power of two up to 2^30: %w", KeyAlignment, v, ErrCorrupt)
		}
		f.Alignment = int64(a)
	}

	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.byName = make(map[string]int, nTensors)
	for i := range nTensors {
		t, err := d.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := f.byName[t.Name]; dup {
			return nil, fmt.Errorf("tensor %q appears twice: %w", t.Name, ErrCorrupt)
		}
		if t.Offset%f.Alignment != 0 {
			return nil, fmt.Errorf("tensor %q: offset %d is not a multiple of the alignment %d: %w", t.Name, t.Offset, f.Alignment, ErrMisaligned)
		}
		f.byName[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}

	f.DataOffset = alignUp(d.pos, f.Alignment)
	if err := f.placeTensors(); err != nil {
		return nil, err
	}
	return f, nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// placeTensors sizes every tensor and checks that the data ranges lie inside
// the file without overlapping. A tensor's span is the distance from its
// offset to the next tensor's (or to the end of the file); the span is also
// what tells the two layouts stored under id 42 apart.
func (f *File) placeTensors() error {
	if len(f.Tensors) == 0 {
		return nil
	}
	if f.DataOffset > int64(len(f.data)) {
		return fmt.Errorf("tensor data section starts at %d, past the end of the %d-byte file: %w", f.DataOffset, len(f.data), ErrTruncated)
	}
	dataLen := int64(len(f.data)) - f.DataOffset
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	for k, i := range order {
		t := &f.Tensors[i]
		end := dataLen
		if k+1 < len(order) {
			end = f.Tensors[order[k+1]].Offset
		}
		if t.Offset > dataLen {
			return fmt.Errorf("tensor %q: offset %d is past the end of the data (%d bytes): %w: %w", t.Name, t.Offset, dataLen, ErrRange, ErrTruncated)
		}
		span := end - t.Offset
		size, err := f.tensorSize(t, span)
		if err != nil {
			return err
		}
		t.Size = size
		if size > span {
			if k+1 < len(order) && end <= dataLen {
				next := &f.Tensors[order[k+1]]
				return fmt.Errorf("tensor %q (%d bytes at offset %d) overlaps tensor %q at offset %d: %w", t.Name, size, t.Offset, next.Name, next.Offset, ErrOverlap)
			}
			return fmt.Errorf("tensor %q: %d bytes at offset %d run past the end of the data (%d bytes): %w: %w", t.Name, size, t.Offset, dataLen, ErrRange, ErrTruncated)
		}
	}
	return nil
}

// tensorSize is the byte size of t, resolving id 42: the current layout (64
// weights in 18 bytes) when it fits the span, else the legacy g128 layout
// (128 in 34 bytes, smaller) when that fits.
func (f *File) tensorSize(t *TensorInfo, span int64) (int64, error) {
	rows := t.Rows()
	size, err := tensorBytes(t.Type, t.Shape[0], rows)
	if err != nil && t.Type != Q2_0 {
		return 0, fmt.Errorf("tensor %q %v of %s: %w", t.Name, t.Shape, t.Type, err)
	}
	if t.Type == Q2_0 && (err != nil || size > span) {
		if legacy, lerr := tensorBytes(Q2_0G128, t.Shape[0], rows); lerr == nil && legacy <= span {
			t.Type = Q2_0G128
			return legacy, nil
		}
		if err != nil {
			return 0, fmt.Errorf("tensor %q %v of %s: %w", t.Name, t.Shape, t.Type, err)
		}
	}
	return size, nil
}

// tensorBytes is the size of rows rows of ne0 elements, overflow-checked.
func tensorBytes(t Type, ne0, rows int64) (int64, error) {
	rb, err := t.RowBytes(ne0)
	if err != nil {
		return 0, err
	}
	if rows != 0 && rb > math.MaxInt64/rows {
		return 0, fmt.Errorf("%w: %d rows of %d bytes overflow int64", ErrShape, rows, rb)
	}
	return rb * rows, nil
}

// decoder reads little-endian GGUF structures from a byte slice, checking
// every length against the bytes left.
type decoder struct {
	buf []byte
	pos int64
}

func (d *decoder) left() int64 { return int64(len(d.buf)) - d.pos }

func (d *decoder) take(n int64, what string) ([]byte, error) {
	if n < 0 || n > d.left() {
		return nil, fmt.Errorf("reading %s at offset %d: need %d bytes, %d left: %w", what, d.pos, n, d.left(), ErrTruncated)
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	b, err := d.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	b, err := d.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a uint64 count of items each at least minSize bytes long and
// rejects counts the remaining bytes cannot hold, so a bad count never
// drives an allocation.
func (d *decoder) count(what string, minSize int64) (int, error) {
	at := d.pos
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	if n > uint64(d.left()/minSize) {
		return 0, fmt.Errorf("%s %d at offset %d exceeds what the %d remaining bytes can hold: %w", what, n, at, d.left(), ErrTruncated)
	}
	return int(n), nil
}

func (d *decoder) str(what string) (string, error) {
	at := d.pos
	n, err := d.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(d.left()) {
		return "", fmt.Errorf("%s at offset %d: length %d exceeds the %d remaining bytes: %w", what, at, n, d.left(), ErrTruncated)
	}
	b, _ := d.take(int64(n), what)
	return string(b), nil
}

// strings reads n strings with two allocations (vocabularies hold hundreds
// of thousands): a first pass checks the lengths, then one copy of the
// whole region backs every string.
func (d *decoder) strings(n int) ([]string, error) {
	start := d.pos
	for i := range n {
		at := d.pos
		size, err := d.u64("string array element length")
		if err != nil {
			return nil, fmt.Errorf("string array element %d: %w", i, err)
		}
		if size > uint64(d.left()) {
			return nil, fmt.Errorf("string array element %d at offset %d: length %d exceeds the %d remaining bytes: %w", i, at, size, d.left(), ErrTruncated)
		}
		d.pos += int64(size)
	}
	region := string(d.buf[start:d.pos])
	out := make([]string, n)
	off := int64(0)
	for i := range out {
		size := int64(binary.LittleEndian.Uint64(d.buf[start+off:]))
		out[i] = region[off+8 : off+8+size]
		off += 8 + size
	}
	return out, nil
}

func (d *decoder) value(t ValueType, depth int) (Value, error) {
	if !t.valid() {
		return Value{}, fmt.Errorf("value type %d at offset %d: %w", uint32(t), d.pos-4, ErrCorrupt)
	}
	if t == TypeArray {
		return d.array(depth)
	}
	if t == TypeString {
		s, err := d.str("string value")
		return Value{Type: t, data: s}, err
	}
	b, err := d.take(int64(t.fixedSize()), t.String()+" value")
	if err != nil {
		return Value{}, err
	}
	v := Value{Type: t}
	switch t {
	case TypeUint8:
		v.data = b[0]
	case TypeInt8:
		v.data = int8(b[0])
	case TypeBool:
		if b[0] > 1 {
			return Value{}, fmt.Errorf("bool value %d at offset %d: %w", b[0], d.pos-1, ErrCorrupt)
		}
		v.data = b[0] == 1
	case TypeUint16:
		v.data = binary.LittleEndian.Uint16(b)
	case TypeInt16:
		v.data = int16(binary.LittleEndian.Uint16(b))
	case TypeUint32:
		v.data = binary.LittleEndian.Uint32(b)
	case TypeInt32:
		v.data = int32(binary.LittleEndian.Uint32(b))
	case TypeFloat32:
		v.data = math.Float32frombits(binary.LittleEndian.Uint32(b))
	case TypeUint64:
		v.data = binary.LittleEndian.Uint64(b)
	case TypeInt64:
		v.data = int64(binary.LittleEndian.Uint64(b))
	case TypeFloat64:
		v.data = math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return v, nil
}

func (d *decoder) array(depth int) (Value, error) {
	if depth >= maxArrayDepth {
		return Value{}, fmt.Errorf("arrays nested deeper than %d at offset %d: %w", maxArrayDepth, d.pos, ErrCorrupt)
	}
	et32, err := d.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	et := ValueType(et32)
	if !et.valid() {
		return Value{}, fmt.Errorf("array element type %d at offset %d: %w", et32, d.pos-4, ErrCorrupt)
	}
	n, err := d.count("array length", int64(et.minEncodedSize()))
	if err != nil {
		return Value{}, err
	}
	v := Value{Type: TypeArray, Elem: et}
	if size := et.fixedSize(); size > 0 {
		b, _ := d.take(int64(n)*int64(size), "array data") // count checked that it fits
		if et == TypeBool {
			for i, c := range b {
				if c > 1 {
					return Value{}, fmt.Errorf("bool array element %d is %d: %w", i, c, ErrCorrupt)
				}
			}
		}
		v.data = decodeFixedArray(et, b, n)
		return v, nil
	}
	switch et {
	case TypeString:
		v.data, err = d.strings(n)
		if err != nil {
			return Value{}, err
		}
	case TypeArray:
		a := make([]Value, n)
		for i := range a {
			if a[i], err = d.array(depth + 1); err != nil {
				return Value{}, fmt.Errorf("array element %d: %w", i, err)
			}
		}
		v.data = a
	}
	return v, nil
}

// decodeFixedArray converts n little-endian elements of type t.
func decodeFixedArray(t ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return append(make([]uint8, 0, n), b...)
	case TypeInt8:
		return decodeEach(b, n, 1, func(e []byte) int8 { return int8(e[0]) })
	case TypeBool:
		return decodeEach(b, n, 1, func(e []byte) bool { return e[0] == 1 })
	case TypeUint16:
		return decodeEach(b, n, 2, le.Uint16)
	case TypeInt16:
		return decodeEach(b, n, 2, func(e []byte) int16 { return int16(le.Uint16(e)) })
	case TypeUint32:
		return decodeEach(b, n, 4, le.Uint32)
	case TypeInt32:
		return decodeEach(b, n, 4, func(e []byte) int32 { return int32(le.Uint32(e)) })
	case TypeFloat32:
		return decodeEach(b, n, 4, func(e []byte) float32 { return math.Float32frombits(le.Uint32(e)) })
	case TypeUint64:
		return decodeEach(b, n, 8, le.Uint64)
	case TypeInt64:
		return decodeEach(b, n, 8, func(e []byte) int64 { return int64(le.Uint64(e)) })
	case TypeFloat64:
		return decodeEach(b, n, 8, func(e []byte) float64 { return math.Float64frombits(le.Uint64(e)) })
	}
	return nil
}

// decodeEach converts n elements of size bytes each from b.
func decodeEach[T any](b []byte, n, size int, conv func([]byte) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = conv(b[size*i:])
	}
	return out
}

func (d *decoder) tensorInfo(i int) (TensorInfo, error) {
	name, err := d.str(fmt.Sprintf("name of tensor %d", i))
	if err != nil {
		return TensorInfo{}, err
	}
	nDims, err := d.u32(fmt.Sprintf("dimension count of tensor %q", name))
	if err != nil {
		return TensorInfo{}, err
	}
	if nDims == 0 || nDims > MaxDims {
		return TensorInfo{}, fmt.Errorf("tensor %q has %d dimensions, want 1 to %d: %w", name, nDims, MaxDims, ErrShape)
	}
	t := TensorInfo{Name: name, Shape: make([]int64, nDims)}
	elems := int64(1)
	for k := range t.Shape {
		n, err := d.u64(fmt.Sprintf("dimension %d of tensor %q", k, name))
		if err != nil {
			return TensorInfo{}, err
		}
		if n > math.MaxInt64 || (n != 0 && elems > math.MaxInt64/int64(n)) {
			return TensorInfo{}, fmt.Errorf("tensor %q: dimension %d = %d overflows the element count: %w", name, k, n, ErrShape)
		}
		t.Shape[k] = int64(n)
		elems *= int64(n)
	}
	typ, err := d.u32(fmt.Sprintf("type of tensor %q", name))
	if err != nil {
		return TensorInfo{}, err
	}
	t.Type = Type(typ)
	if !t.Type.Known() || t.Type == Q2_0G128 {
		return TensorInfo{}, fmt.Errorf("tensor %q: type id %d: %w", name, typ, ErrUnknownType)
	}
	if t.Shape[0]%int64(t.Type.BlockSize()) != 0 {
		return TensorInfo{}, fmt.Errorf("tensor %q: row length %d is not a multiple of the %s block size %d: %w", name, t.Shape[0], t.Type, t.Type.BlockSize(), ErrShape)
	}
	off, err := d.u64(fmt.Sprintf("offset of tensor %q", name))
	if err != nil {
		return TensorInfo{}, err
	}
	if off > math.MaxInt64 {
		return TensorInfo{}, fmt.Errorf("tensor %q: offset %d: %w", name, off, ErrRange)
	}
	t.Offset = int64(off)
	return t, nil
}
