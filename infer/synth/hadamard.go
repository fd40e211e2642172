package synth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// A rotated model stores its 2-D weights as Bonsai 2 does: in a Hadamard
// basis described by prism.hadamard.* (version 1), so that a listed weight W
// computes y = W_stored · H(s_n ⊙ P(x)) and the embedding's rows are rotated
// back, h = s_n ⊙ H(z). Its twin is the same function with the rotation
// folded into F32 weights and no prism.hadamard keys:
//
//	W_twin   = W_stored · H · diag(s_n) · P     (listed weights)
//	E_twin,v = s_n ⊙ H(z_v)                     (token_embd rows)
//
// and every other tensor (norms, weights left out of weight_names) copied
// as it is. Any
// implementation of the rotation run on the rotated file must therefore
// match a plain implementation, llama.cpp included, run on the twin. The
// stored weights are ternary times a per-row scale, so the Prism codecs
// store them without loss; the twin folds what the stored type decodes to,
// so the pair computes the same function whatever the type.

// RotatedOptions choose a rotated model and its twin.
type RotatedOptions struct {
	Options // the model; Type is the stored type of every 2-D weight
	// Block is prism.hadamard.block_size: a power of two dividing every
	// rotated width (1024 in Bonsai 2; smaller for small shapes).
	Block int
	// Unrotated names 2-D weights left out of weight_names: they read the
	// activation as it is, as Bonsai 2's ssm_alpha and ssm_beta do, and
	// keep the plan's Gaussian values and type in both files.
	Unrotated []string
}

// ErrRotatedShape is returned for a rotation the shape cannot take.
var ErrRotatedShape = errors.New("shape unfit for the Hadamard rotation")

// rotationPlan says how a rotated pair treats a model's tensors.
type rotationPlan struct {
	block     int
	unrotated map[string]bool
	inverse   string // the embedding table: its rows are rotated back
	// grouped: the V-head layout before ssm_out (gdn_v_grouped), HeadDim 0
	// when the model has none.
	grouped headLayout
}

// headLayout is the tiled V-head order of a DeltaNet output: heads of
// headDim values, head r·kHeads + k.
type headLayout struct{ headDim, kHeads int }

// WriteRotated writes the rotated model of o to rotatedPath and its
// unrotated F32 twin to twinPath. Both are held in memory while written:
// meant for test-sized shapes.
func WriteRotated(rotatedPath, twinPath string, o RotatedOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.LogitStd == 0 {
		o.LogitStd = DefaultLogitStd
	}
	if o.Shape.Tied {
		// Version 1 rotates token_embd's rows, so the output must be a
		// matrix of its own.
		return fmt.Errorf("synth: %w: shape %s ties the output to the embedding (prism.hadamard version 1 needs a separate output)", ErrRotatedShape, o.Shape.Name)
	}
	voc, err := qwen3Vocab(o.Shape.Vocab)
	if err != nil {
		return err
	}
	p := rotationPlan{block: o.Block, unrotated: map[string]bool{}, inverse: "token_embd.weight"}
	for _, n := range o.Unrotated {
		p.unrotated[n] = true
	}
	twin := o.Options
	twin.Type = gguf.F32
	return writeRotatedPair(rotatedPath, twinPath, plan(o.Shape, o.Type, o.LogitStd), p, o.Seed,
		func(w *gguf.Writer) { setMetadata(w, o.Options, voc) },
		func(w *gguf.Writer) { setMetadata(w, twin, voc) })
}

// writeRotatedPair is WriteRotated for any architecture's plan: tensors of
// the plan whose type is not F32 vectors are the 2-D weights to rotate.
func writeRotatedPair(rotatedPath, twinPath string, ts []tensor, p rotationPlan, seed uint64, rotatedMeta, twinMeta func(*gguf.Writer)) error {
	if p.block < 1 || p.block&(p.block-1) != 0 {
		return fmt.Errorf("synth: %w: block %d is not a power of two", ErrRotatedShape, p.block)
	}
	// The sign vector of each rotated width, and the weights to list.
	signs := map[int][]float64{}
	var widths []int32
	var listed []string
	for _, t := range ts {
		if len(t.shape) < 2 || p.unrotated[t.name] {
			continue
		}
		n := int(t.shape[0])
		if n%p.block != 0 {
			return fmt.Errorf("synth: %w: %s has rows of %d, not a multiple of the block %d", ErrRotatedShape, t.name, n, p.block)
		}
		if signs[n] == nil {
			signs[n] = randomSigns(seed, n)
			widths = append(widths, int32(n))
		}
		if t.name != p.inverse {
			listed = append(listed, t.name)
		}
	}
	var values []int32
	for _, n := range widths {
		for _, s := range signs[int(n)] {
			values = append(values, int32(s))
		}
	}

	rw, tw := gguf.NewWriter(), gguf.NewWriter()
	rotatedMeta(rw)
	twinMeta(tw)
	rw.Set("prism.hadamard.version", uint32(1))
	rw.Set("prism.hadamard.block_size", uint32(p.block))
	rw.Set("prism.hadamard.transform", "normalized-sylvester-walsh-hadamard")
	rw.Set("prism.hadamard.axis", "input-last-dimension")
	rw.Set("prism.hadamard.sign_mode", "explicit")
	rw.Set("prism.hadamard.sign_widths", widths)
	rw.Set("prism.hadamard.sign_values", values)
	rw.Set("prism.hadamard.weight_names", listed)
	rw.Set("prism.hadamard.inverse_weight_names", []string{p.inverse})
	rw.Set("prism.hadamard.gdn_v_grouped", p.grouped.headDim > 0)

	for _, t := range ts {
		stored, folded, err := rotatedTensor(t, p, signs, seed)
		if err != nil {
			return err
		}
		twinType := gguf.F32
		if len(t.shape) < 2 || p.unrotated[t.name] {
			twinType = t.typ
		}
		if err := rw.AddTensor(t.name, t.typ, t.shape, stored); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
		if err := tw.AddTensor(t.name, twinType, t.shape, folded); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if err := rw.WriteFile(rotatedPath); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	if err := tw.WriteFile(twinPath); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// rotatedTensor draws t and returns its bytes in the rotated file and in the
// twin.
func rotatedTensor(t tensor, p rotationPlan, signs map[int][]float64, seed uint64) (stored, twin []byte, err error) {
	rng := stream(seed, t.name, 0)
	ne0 := int(t.shape[0])
	rowBytes, err := t.typ.RowBytes(int64(ne0))
	if err != nil {
		return nil, nil, fmt.Errorf("synth: tensor %s: %w", t.name, err)
	}
	rows := int(t.rows())
	if len(t.shape) < 2 || p.unrotated[t.name] {
		// A norm, or a weight that reads the activation as it is: the
		// plan's values, the same bytes in both files.
		b := make([]byte, int64(rows)*rowBytes)
		row := make([]float32, ne0)
		for r := range rows {
			for i := range row {
				row[i] = float32(t.mean + t.std*rng.NormFloat64())
			}
			if err := quant.QuantizeRow(t.typ, row, b[int64(r)*rowBytes:int64(r+1)*rowBytes]); err != nil {
				return nil, nil, fmt.Errorf("synth: quantizing %s to %s: %w", t.name, t.typ, err)
			}
		}
		return b, b, nil
	}
	stored, twin = make([]byte, int64(rows)*rowBytes), make([]byte, 4*rows*ne0)
	row, deq := make([]float32, ne0), make([]float32, ne0)
	w := make([]float64, ne0)
	// Ternary {−a, 0, a} has standard deviation a·√(2/3).
	unit := math.Sqrt(2.0 / 3)
	for r := range rows {
		a := t.std / unit
		if t.rowSpread != 0 {
			a *= math.Exp(t.rowSpread * rng.NormFloat64())
		}
		for i := range row {
			row[i] = float32(a * float64(rng.IntN(3)-1))
		}
		out := stored[int64(r)*rowBytes : int64(r+1)*rowBytes]
		if err := quant.QuantizeRow(t.typ, row, out); err != nil {
			return nil, nil, fmt.Errorf("synth: quantizing %s to %s: %w", t.name, t.typ, err)
		}
		if err := quant.DequantizeRow(t.typ, out, deq); err != nil {
			return nil, nil, fmt.Errorf("synth: %s: %w", t.name, err)
		}
		for i, v := range deq {
			w[i] = float64(v)
		}
		switch {
		case t.name == p.inverse:
			unrotateRow(w, p.block, signs[ne0])
		default:
			var g headLayout
			if strings.HasSuffix(t.name, ".ssm_out.weight") {
				g = p.grouped
			}
			foldRow(w, p.block, signs[ne0], g)
		}
		for i, v := range w {
			binary.LittleEndian.PutUint32(twin[4*(r*ne0+i):], math.Float32bits(float32(v)))
		}
	}
	return stored, twin, nil
}

// randomSigns is the seeded ±1 vector of width n.
func randomSigns(seed uint64, n int) []float64 {
	rng := stream(seed, fmt.Sprintf("prism.hadamard.signs.%d", n), 0)
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(1 - 2*rng.IntN(2))
	}
	return s
}

// foldRow turns a stored row w (y = w · H(s ⊙ P(x))) into the row of the
// same function of x: w_twin = w·H·diag(s)·P, that is
// w_twin[π(c)] = s[c]·(H w)[c] where (P x)[c] = x[π(c)] (H is symmetric).
func foldRow(w []float64, block int, s []float64, g headLayout) {
	hadamard64(w, block)
	for c := range w {
		w[c] *= s[c]
	}
	if g.headDim > 0 {
		folded := make([]float64, len(w))
		for c, v := range w {
			folded[groupedSource(c, len(w), g)] = v
		}
		copy(w, folded)
	}
}

// unrotateRow turns a stored embedding row z into the row the model sees:
// s ⊙ H(z).
func unrotateRow(z []float64, block int, s []float64) {
	hadamard64(z, block)
	for c := range z {
		z[c] *= s[c]
	}
}

// groupedSource is π(c): grouped position c (head k·rep + r) reads tiled
// position (head r·kHeads + k) of a width-n vector.
func groupedSource(c, n int, g headLayout) int {
	rep := n / g.headDim / g.kHeads
	head, off := c/g.headDim, c%g.headDim
	k, r := head/rep, head%rep
	return (r*g.kHeads+k)*g.headDim + off
}

// hadamard64 applies the normalised block Walsh–Hadamard transform to x in
// place, in float64.
func hadamard64(x []float64, block int) {
	norm := 1 / math.Sqrt(float64(block))
	for b := 0; b < len(x); b += block {
		v := x[b : b+block]
		for h := 1; h < block; h <<= 1 {
			for i := 0; i < block; i += 2 * h {
				for j := i; j < i+h; j++ {
					v[j], v[j+h] = v[j]+v[j+h], v[j]-v[j+h]
				}
			}
		}
		for i := range v {
			v[i] *= norm
		}
	}
}
