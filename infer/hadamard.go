package infer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Bonsai 2 stores its weights in a rotated basis (prism.hadamard.*): for
// each weight W named in weight_names, with input width n,
//
//	y = W_stored · H(s_n ⊙ P(x))
//
// H being the block-diagonal normalised Sylvester Walsh–Hadamard transform of
// block_size values, s_n the file's ±1 sign vector for width n, and P the
// identity except before ssm_out when gdn_v_grouped is set (see
// Rotation.Regroup). The rows of the tables in inverse_weight_names
// (token_embd) are rotated back after the lookup: h = s_n ⊙ H(z). Every other
// tensor takes the activation as it is. Since H and the signs are orthogonal,
// such a file computes the same function as one with the rotation folded
// into its weights; the rotation exists so that low-bit codecs see rotated,
// outlier-free rows.

// ErrBadRotation: a file's prism.hadamard.* metadata is inconsistent (an
// unknown version or transform, a sign vector of the wrong length, a listed
// tensor that does not exist, …). The error names the key.
var ErrBadRotation = errors.New("inconsistent Hadamard rotation metadata")

// The prism.hadamard.* keys, and the values version 1 knows.
const (
	hadamardPrefix        = "prism.hadamard."
	keyHadamardVersion    = hadamardPrefix + "version"
	keyHadamardBlock      = hadamardPrefix + "block_size"
	keyHadamardTransform  = hadamardPrefix + "transform"
	keyHadamardAxis       = hadamardPrefix + "axis"
	keyHadamardSignMode   = hadamardPrefix + "sign_mode"
	keyHadamardSignWidths = hadamardPrefix + "sign_widths"
	keyHadamardSignValues = hadamardPrefix + "sign_values"
	keyHadamardWeights    = hadamardPrefix + "weight_names"
	keyHadamardInverse    = hadamardPrefix + "inverse_weight_names"
	keyHadamardGrouped    = hadamardPrefix + "gdn_v_grouped"

	hadamardVersion   = 1
	hadamardTransform = "normalized-sylvester-walsh-hadamard"
	hadamardAxis      = "input-last-dimension"
	signModeExplicit  = "explicit"
	signModeIdentity  = "identity"

	// maxHadamardBlock bounds block_size far above any real file (1024)
	// so that widths and offsets cannot overflow.
	maxHadamardBlock = 1 << 24
)

// HadamardSpec is a file's rotation, read from its prism.hadamard.* keys and
// checked against its tensors. It knows widths and names, not a backend:
// Bind makes the Rotations a network uses.
type HadamardSpec struct {
	Block int // block_size
	// signs holds the ±1 vector of each input width (sign_mode explicit),
	// nil for sign_mode identity.
	signs   map[int][]float32
	inputs  map[string]rotatedInput // weight_names
	inverse map[string]int          // inverse_weight_names: row width
}

// rotatedInput is what one listed weight's input needs.
type rotatedInput struct {
	width   int
	regroup HeadOrder // HeadDim > 0: P before ssm_out
}

// ReadHadamard reads and checks f's prism.hadamard.* metadata. A file
// without such keys has no rotation: it returns nil and no error. An
// inconsistent file is refused with an error wrapping ErrBadRotation that
// names the key.
func ReadHadamard(f *gguf.File) (*HadamardSpec, error) {
	if !hasRotation(f) {
		return nil, nil
	}
	kv := f.KV
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadRotation, key, fmt.Sprintf(format, args...))
	}
	uintKey := func(key string) (uint64, error) {
		v, ok := kv.Get(key)
		if !ok {
			return 0, bad(key, "missing")
		}
		n, ok := kv.Uint(key)
		if !ok {
			return 0, bad(key, "%v is not a non-negative integer", v)
		}
		return n, nil
	}
	stringKey := func(key string, want ...string) (string, error) {
		v, ok := kv.Get(key)
		if !ok {
			return "", bad(key, "missing")
		}
		s, ok := kv.String(key)
		if !ok {
			return "", bad(key, "%v is not a string", v)
		}
		for _, w := range want {
			if s == w {
				return s, nil
			}
		}
		return "", bad(key, "unknown value %q (known: %s)", s, strings.Join(want, ", "))
	}

	version, err := uintKey(keyHadamardVersion)
	if err != nil {
		return nil, err
	}
	if version != hadamardVersion {
		return nil, bad(keyHadamardVersion, "unknown version %d (known: %d)", version, hadamardVersion)
	}
	block, err := uintKey(keyHadamardBlock)
	if err != nil {
		return nil, err
	}
	if block == 0 || block > maxHadamardBlock || block&(block-1) != 0 {
		return nil, bad(keyHadamardBlock, "%d is not a power of two up to %d", block, maxHadamardBlock)
	}
	if _, err := stringKey(keyHadamardTransform, hadamardTransform); err != nil {
		return nil, err
	}
	if _, err := stringKey(keyHadamardAxis, hadamardAxis); err != nil {
		return nil, err
	}
	mode, err := stringKey(keyHadamardSignMode, signModeExplicit, signModeIdentity)
	if err != nil {
		return nil, err
	}
	h := &HadamardSpec{Block: int(block), inputs: map[string]rotatedInput{}, inverse: map[string]int{}}
	if mode == signModeExplicit {
		if h.signs, err = readSigns(kv, h.Block); err != nil {
			return nil, err
		}
	} else {
		for _, key := range []string{keyHadamardSignWidths, keyHadamardSignValues} {
			if _, ok := kv.Get(key); ok {
				return nil, bad(key, "present, but %s is %q", keyHadamardSignMode, signModeIdentity)
			}
		}
	}
	grouped := false
	if v, ok := kv.Get(keyHadamardGrouped); ok {
		if grouped, ok = kv.Bool(keyHadamardGrouped); !ok {
			return nil, bad(keyHadamardGrouped, "%v is not a bool", v)
		}
	}

	names := func(key string, required bool) ([]string, error) {
		v, ok := kv.Get(key)
		if !ok {
			if required {
				return nil, bad(key, "missing")
			}
			return nil, nil
		}
		s, ok := kv.Strings(key)
		if !ok {
			return nil, bad(key, "%v is not an array of strings", v)
		}
		return s, nil
	}
	// width checks a listed tensor and returns its input (row) width.
	width := func(key, name string) (int, error) {
		t, ok := f.Tensor(name)
		if !ok {
			return 0, bad(key, "lists %q, which the file does not hold", name)
		}
		if len(t.Shape) < 2 {
			return 0, bad(key, "lists %q of shape %v, not a matrix", name, t.Shape)
		}
		n := t.Shape[0]
		if n%int64(h.Block) != 0 {
			return 0, bad(key, "%q has rows of %d, not a multiple of %s %d", name, n, keyHadamardBlock, h.Block)
		}
		if h.signs != nil && h.signs[int(n)] == nil {
			return 0, bad(key, "%q has rows of %d, for which %s holds no sign vector", name, n, keyHadamardSignWidths)
		}
		return int(n), nil
	}
	weights, err := names(keyHadamardWeights, true)
	if err != nil {
		return nil, err
	}
	inverse, err := names(keyHadamardInverse, false)
	if err != nil {
		return nil, err
	}
	var heads *vHeads // the V heads before ssm_out, read when needed
	for _, name := range weights {
		if _, dup := h.inputs[name]; dup {
			return nil, bad(keyHadamardWeights, "lists %q twice", name)
		}
		n, err := width(keyHadamardWeights, name)
		if err != nil {
			return nil, err
		}
		in := rotatedInput{width: n}
		if grouped && strings.HasSuffix(name, ".ssm_out.weight") {
			if heads == nil {
				g, err := gdnHeads(f, n)
				if err != nil {
					return nil, bad(keyHadamardGrouped, "%q: %v", name, err)
				}
				heads = &g
			}
			if n != heads.width {
				return nil, bad(keyHadamardGrouped, "%q has rows of %d, the model's V heads %d", name, n, heads.width)
			}
			in.regroup = heads.HeadOrder
		}
		h.inputs[name] = in
	}
	for _, name := range inverse {
		if _, dup := h.inverse[name]; dup {
			return nil, bad(keyHadamardInverse, "lists %q twice", name)
		}
		if _, both := h.inputs[name]; both {
			return nil, bad(keyHadamardInverse, "%q is also in %s", name, keyHadamardWeights)
		}
		n, err := width(keyHadamardInverse, name)
		if err != nil {
			return nil, err
		}
		h.inverse[name] = n
	}
	// A tied output reads token_embd as a matmul weight in the primal
	// basis, which version 1 cannot express for a rotated table.
	if _, ok := h.inverse[tokenEmbd]; ok {
		if _, ok := f.Tensor(outputWeight); !ok {
			return nil, bad(keyHadamardInverse, "%s is rotated, but the file has no %s (version %d needs a separate output)", tokenEmbd, outputWeight, hadamardVersion)
		}
	}
	return h, nil
}

// hasRotation reports whether f has prism.hadamard.* keys, consistent or
// not.
func hasRotation(f *gguf.File) bool {
	for _, k := range f.KV.Keys() {
		if strings.HasPrefix(k, hadamardPrefix) {
			return true
		}
	}
	return false
}

const (
	tokenEmbd    = "token_embd.weight"
	outputWeight = "output.weight"
)

// readSigns reads sign_widths and sign_values: one ±1 vector per width,
// concatenated in the order of the widths.
func readSigns(kv gguf.Metadata, block int) (map[int][]float32, error) {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadRotation, key, fmt.Sprintf(format, args...))
	}
	wv, ok := kv.Get(keyHadamardSignWidths)
	if !ok {
		return nil, bad(keyHadamardSignWidths, "missing (%s is %q)", keyHadamardSignMode, signModeExplicit)
	}
	widths, ok := kv.Int32s(keyHadamardSignWidths)
	if !ok {
		return nil, bad(keyHadamardSignWidths, "%v is not an array of integers", wv)
	}
	vv, ok := kv.Get(keyHadamardSignValues)
	if !ok {
		return nil, bad(keyHadamardSignValues, "missing (%s is %q)", keyHadamardSignMode, signModeExplicit)
	}
	// Writers store the signs as integers or as floats.
	values, ok := kv.Float32s(keyHadamardSignValues)
	if !ok {
		ints, isInt := kv.Int32s(keyHadamardSignValues)
		if !isInt {
			return nil, bad(keyHadamardSignValues, "%v is not an array of numbers", vv)
		}
		values = make([]float32, len(ints))
		for i, s := range ints {
			values[i] = float32(s)
		}
	}
	if len(widths) == 0 {
		return nil, bad(keyHadamardSignWidths, "empty")
	}
	var total int64
	signs := make(map[int][]float32, len(widths))
	for _, w := range widths {
		switch {
		case w <= 0 || int(w)%block != 0:
			return nil, bad(keyHadamardSignWidths, "width %d is not a positive multiple of %s %d", w, keyHadamardBlock, block)
		case signs[int(w)] != nil:
			return nil, bad(keyHadamardSignWidths, "width %d appears twice", w)
		case total+int64(w) > int64(len(values)):
			return nil, bad(keyHadamardSignValues, "%d values, fewer than the widths' sum", len(values))
		}
		signs[int(w)] = values[total : total+int64(w)]
		total += int64(w)
	}
	if total != int64(len(values)) {
		return nil, bad(keyHadamardSignValues, "%d values for widths summing to %d", len(values), total)
	}
	for i, s := range values {
		if s != 1 && s != -1 {
			return nil, bad(keyHadamardSignValues, "value %d is %g, not ±1", i, s)
		}
	}
	return signs, nil
}

// vHeads is the layout of the Gated DeltaNet output that ssm_out reads.
type vHeads struct {
	HeadOrder
	width int // V heads × head dim
}

// gdnHeads reads the V-head layout of a hybrid model's DeltaNet output from
// its ARCH.ssm.* keys and checks that ssm_out's width n fits it.
func gdnHeads(f *gguf.File, n int) (vHeads, error) {
	arch, err := ArchOf(f)
	if err != nil {
		return vHeads{}, err
	}
	get := func(key string) (int, error) {
		v, ok := f.KV.Uint(arch + "." + key)
		if !ok || v == 0 || v > 1<<20 {
			return 0, fmt.Errorf("the model's %s.%s is missing or not a positive integer", arch, key)
		}
		return int(v), nil
	}
	hd, err := get("ssm.state_size")
	if err != nil {
		return vHeads{}, err
	}
	nk, err := get("ssm.group_count")
	if err != nil {
		return vHeads{}, err
	}
	nv, err := get("ssm.time_step_rank")
	if err != nil {
		return vHeads{}, err
	}
	if nv%nk != 0 {
		return vHeads{}, fmt.Errorf("%d V heads are not a multiple of %d K heads", nv, nk)
	}
	if nv*hd != n {
		return vHeads{}, fmt.Errorf("rows of %d do not hold %d V heads of %d", n, nv, hd)
	}
	return vHeads{HeadOrder: HeadOrder{HeadDim: hd, KHeads: nk}, width: n}, nil
}

// Widths lists the input widths the rotation acts on, ascending.
func (h *HadamardSpec) Widths() []int {
	seen := map[int]bool{}
	for _, in := range h.inputs {
		seen[in.width] = true
	}
	for _, n := range h.inverse {
		seen[n] = true
	}
	ws := make([]int, 0, len(seen))
	for n := range seen {
		ws = append(ws, n)
	}
	sort.Ints(ws)
	return ws
}

// Weights counts the weights whose input is rotated (weight_names), and
// of them those whose input is regrouped first (ssm_out, gdn_v_grouped).
func (h *HadamardSpec) Weights() (rotated, regrouped int) {
	for _, in := range h.inputs {
		rotated++
		if in.regroup.HeadDim > 0 {
			regrouped++
		}
	}
	return rotated, regrouped
}

// HasSigns reports whether the rotation has sign vectors (sign_mode
// explicit).
func (h *HadamardSpec) HasSigns() bool { return h.signs != nil }

// Tables counts the tables whose rows are rotated back after the lookup
// (inverse_weight_names).
func (h *HadamardSpec) Tables() int { return len(h.inverse) }

// SignsName is the synthetic weight name a sign vector of width n is bound
// under.
func SignsName(n int) string { return fmt.Sprintf("prism.hadamard.signs.%d", n) }

// Rotations are a HadamardSpec bound to a backend: per weight name, the
// Rotation its input needs. Nil Rotations rotate nothing.
type Rotations struct {
	inputs  map[string]boundInput
	inverse map[string]Rotation
	widths  []int
}

type boundInput struct {
	Rotation
	width int
}

// Bind binds the sign vectors on b as F32 weights named SignsName(width), so
// that the backend's Hadamard can read them like any weight, and returns the
// Rotations. A nil spec binds nothing and returns nil Rotations.
func (h *HadamardSpec) Bind(b Backend) (*Rotations, error) {
	if h == nil {
		return nil, nil
	}
	bound := map[int]Weight{}
	for n, s := range h.signs {
		data := make([]byte, 4*len(s))
		for i, v := range s {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		w, err := b.LoadWeight(WeightData{Name: SignsName(n), Type: gguf.F32, Shape: []int64{int64(n)}, Data: data})
		if err != nil {
			return nil, fmt.Errorf("binding the Hadamard signs of width %d: %w", n, err)
		}
		bound[n] = w
	}
	// An absent width (sign_mode identity) leaves Signs nil: no signs.
	signs := func(n int) Weight {
		if w, ok := bound[n]; ok {
			return w
		}
		return nil
	}
	r := &Rotations{inputs: map[string]boundInput{}, inverse: map[string]Rotation{}, widths: h.Widths()}
	for name, in := range h.inputs {
		r.inputs[name] = boundInput{Rotation{Block: h.Block, Signs: signs(in.width), Regroup: in.regroup}, in.width}
	}
	for name, n := range h.inverse {
		r.inverse[name] = Rotation{Block: h.Block, Signs: signs(n), SignsAfter: true}
	}
	return r, nil
}

// Input is the rotation the input of the named weight needs before the
// matmul, if any.
func (r *Rotations) Input(name string) (Rotation, bool) {
	if r == nil {
		return Rotation{}, false
	}
	in, ok := r.inputs[name]
	return in.Rotation, ok
}

// Inverse is the rotation of the rows looked up in the named table, if any.
func (r *Rotations) Inverse(name string) (Rotation, bool) {
	if r == nil {
		return Rotation{}, false
	}
	rot, ok := r.inverse[name]
	return rot, ok
}

// Rotator applies a file's rotation in a forward pass. A network routes its
// embedding lookup through Embed and every matmul's input through Input:
//
//	n.rot.Embed(n.x, n.embd)
//	b.MatMul(dst, w, n.rot.Input(w, x))
//
// For a file without rotation both are the plain ops, so a network wires it
// unconditionally.
//
// Input transforms an activation once for all the weights that read it (q, k
// and v; gate and up): it keeps the rotated copy while successive calls
// name the same source, and forgets it as soon as a call names another,
// whether that call's weight is listed or not. Unlisted weights always get
// the source itself (Bonsai 2's ssm_alpha and ssm_beta read h beside the
// rotated q|k|v and z). So a source must not be rewritten between two
// Input calls that read it unless a call with another source comes
// between, which holds for any transformer layer: the tensor a norm
// rewrites was last read before the matmul whose output the residual adds,
// and that matmul reads another tensor, even when a file leaves its weight
// (ssm_out, ffn_down) out of weight_names.
type Rotator struct {
	b    Backend
	rots *Rotations
	// scratch holds the rotated copies, per width and row count (Reserve)
	scratch  map[rotatedShape]*rotated
	maxBatch int
	last     Tensor // the source of the latest Input call
}

// rotatedShape is a scratch tensor's width and rows.
type rotatedShape struct{ width, rows int }

// rotated is a scratch tensor and what it holds.
type rotated struct {
	t       Tensor
	src     Tensor // nil: nothing valid
	regroup HeadOrder
}

// NewRotator reads f's rotation (ReadHadamard), binds it on b and allocates
// its scratch activations for batches of up to maxBatch rows. A file
// without rotation gets a Rotator that rotates nothing.
func NewRotator(f *gguf.File, b Backend, maxBatch int) (*Rotator, error) {
	spec, err := ReadHadamard(f)
	if err != nil {
		return nil, err
	}
	rots, err := spec.Bind(b)
	if err != nil {
		return nil, err
	}
	r := &Rotator{b: b, rots: rots, scratch: map[rotatedShape]*rotated{}, maxBatch: maxBatch}
	for _, rows := range []int{maxBatch, 1} {
		if err := r.Reserve(rows); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Reserve allocates the scratch of every rotated width for inputs of the
// given rows (once): Forward's come at load, a pass over several
// sequences reserves its output rows' before it runs.
func (r *Rotator) Reserve(rows int) error {
	if r.rots == nil {
		return nil
	}
	alloc := tensorAllocator{b: r.b}
	for _, n := range r.rots.widths {
		k := rotatedShape{n, rows}
		if _, ok := r.scratch[k]; !ok {
			r.scratch[k] = &rotated{t: alloc.tensor(fmt.Sprintf("hadamard.%d.%d", n, rows), rows, n)}
		}
	}
	return alloc.err
}

// Input returns x, or x rotated for w when w is a listed weight.
func (r *Rotator) Input(w Weight, x Tensor) Tensor {
	if r.rots == nil {
		return x
	}
	if x != r.last {
		r.forget()
		r.last = x
	}
	in, ok := r.rots.inputs[w.Name()]
	if !ok {
		return x
	}
	// The scratch of w's width and x's rows (Reserve), else the batch's:
	// a shape that is not x's fails in the backend's shape checks, as the
	// matmul would.
	s, ok := r.scratch[rotatedShape{in.width, x.Rows()}]
	if !ok {
		s = r.scratch[rotatedShape{in.width, r.maxBatch}]
	}
	if s.src != x || s.regroup != in.Regroup {
		r.b.Hadamard(s.t, x, in.Rotation)
		s.src, s.regroup = x, in.Regroup
	}
	return s.t
}

// Embed looks the batch's tokens up in w into dst and rotates the rows back
// when w is a rotated table.
func (r *Rotator) Embed(dst Tensor, w Weight) {
	r.b.Embed(dst, w)
	if rot, ok := r.rots.Inverse(w.Name()); ok {
		r.b.Hadamard(dst, dst, rot)
	}
	if dst == r.last {
		r.forget()
	}
}

func (r *Rotator) forget() {
	for _, s := range r.scratch {
		s.src = nil
	}
	r.last = nil
}
