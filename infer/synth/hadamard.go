package synth

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
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
	// rotated width. Zero takes Bonsai 2's 1024 where every width is a
	// multiple of it, else the largest power of two that divides them all.
	Block int
	// Unrotated names 2-D weights left out of weight_names: they read the
	// activation as it is, as Bonsai 2's ssm_alpha and ssm_beta do, and
	// keep the plan's Gaussian values and type in both files. A qwen35
	// model leaves its gates' projections (ssm_alpha, ssm_beta) and conv
	// kernels out in any case, as Bonsai 2 does.
	Unrotated []string
}

// BonsaiBlock is Bonsai 2's prism.hadamard.block_size.
const BonsaiBlock = 1024

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

// rotates reports whether t is stored rotated: a matrix outside the
// unrotated ones.
func (p rotationPlan) rotates(t tensor) bool { return len(t.shape) >= 2 && !p.unrotated[t.name] }

// rotationPlan is Bonsai 2's treatment of the model of o: every matmul
// weight rotated but the unrotated ones, token_embd's rows rotated back,
// and for qwen35 the gates' projections and conv kernels in the primal
// basis and ssm_out's input regrouped (gdn_v_grouped).
func (o RotatedOptions) rotationPlan(ts []tensor) (rotationPlan, error) {
	p := rotationPlan{block: o.Block, unrotated: map[string]bool{}, inverse: "token_embd.weight"}
	for _, n := range o.Unrotated {
		p.unrotated[n] = true
	}
	if s := o.Shape; s.hybrid() {
		for i := range s.Layers {
			if s.attention(i) {
				continue
			}
			pre := fmt.Sprintf("blk.%d.", i)
			// The conv kernel is 2-D but no matmul weight: it never
			// meets the rotated activation.
			for _, n := range []string{"ssm_alpha.weight", "ssm_beta.weight", "ssm_conv1d.weight"} {
				p.unrotated[pre+n] = true
			}
		}
		p.grouped = headLayout{headDim: s.Hybrid.StateSize, kHeads: s.Hybrid.KHeads}
	}
	if p.block == 0 {
		p.block = BonsaiBlock
		for _, t := range ts {
			if p.rotates(t) {
				for t.shape[0]%int64(p.block) != 0 {
					p.block /= 2
				}
			}
		}
	}
	if p.block < 1 || p.block&(p.block-1) != 0 {
		return p, fmt.Errorf("synth: %w: block %d is not a power of two", ErrRotatedShape, p.block)
	}
	return p, nil
}

// WriteRotated writes the rotated model of o to rotatedPath and, unless
// twinPath is empty, its unrotated F32 twin to twinPath. Tensors are
// generated into scratch files next to the outputs, as Write does, so memory
// stays small whatever the shape; a twin is F32 throughout, four bytes a
// weight, and so meant for small shapes.
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
	ts := plan(o.Shape, o.Type, o.LogitStd)
	p, err := o.rotationPlan(ts)
	if err != nil {
		return err
	}
	twin := o.Options
	twin.Type = gguf.F32
	return writeRotatedPair(rotatedPath, twinPath, ts, p, o.Seed,
		func(w *gguf.Writer) { setMetadata(w, o.Options, voc) },
		func(w *gguf.Writer) { setMetadata(w, twin, voc) })
}

// writeRotatedPair is WriteRotated for any architecture's plan.
func writeRotatedPair(rotatedPath, twinPath string, ts []tensor, p rotationPlan, seed uint64, rotatedMeta, twinMeta func(*gguf.Writer)) error {
	widths, listed, err := p.layout(ts)
	if err != nil {
		return err
	}
	signs := map[int][]float64{}
	var values []int32
	for _, n := range widths {
		signs[int(n)] = randomSigns(seed, int(n))
		for _, s := range signs[int(n)] {
			values = append(values, int32(s))
		}
	}
	stored := make([]tensor, len(ts))
	for i, t := range ts {
		stored[i] = t
		stored[i].ternary = p.rotates(t)
	}

	data, release, err := spool(rotatedPath, stored, func(w io.Writer, t tensor) error { return writeTensor(w, t, seed) })
	if err != nil {
		return err
	}
	defer release()
	rw := gguf.NewWriter()
	rotatedMeta(rw)
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
	for i, t := range stored {
		if err := rw.AddTensor(t.name, t.typ, t.shape, data[i]); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if err := rw.WriteFile(rotatedPath); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	if twinPath == "" {
		return nil
	}

	index := map[string]int{}
	for i, t := range stored {
		index[t.name] = i
	}
	folded, releaseTwin, err := spool(twinPath, twinTensors(stored), func(w io.Writer, t tensor) error {
		return writeTwin(w, stored[index[t.name]], data[index[t.name]], p, signs)
	})
	if err != nil {
		return err
	}
	defer releaseTwin()
	tw := gguf.NewWriter()
	twinMeta(tw)
	for i, t := range twinTensors(stored) {
		if err := tw.AddTensor(t.name, t.typ, t.shape, folded[i]); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if err := tw.WriteFile(twinPath); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// layout lists the rotated input widths (sign_widths), in the order the
// plan first meets them, and the weights to list (weight_names).
func (p rotationPlan) layout(ts []tensor) (widths []int32, listed []string, err error) {
	seen := map[int64]bool{}
	for _, t := range ts {
		if !p.rotates(t) {
			continue
		}
		n := t.shape[0]
		if n%int64(p.block) != 0 {
			return nil, nil, fmt.Errorf("synth: %w: %s has rows of %d, not a multiple of the block %d", ErrRotatedShape, t.name, n, p.block)
		}
		if !seen[n] {
			seen[n] = true
			widths = append(widths, int32(n))
		}
		if t.name != p.inverse {
			listed = append(listed, t.name)
		}
	}
	return widths, listed, nil
}

// twinTensors are the twin's tensors: the rotated ones in F32, the others
// as the rotated file stores them.
func twinTensors(stored []tensor) []tensor {
	ts := make([]tensor, len(stored))
	for i, t := range stored {
		ts[i] = t
		if t.ternary {
			ts[i].typ, ts[i].ternary = gguf.F32, false
		}
	}
	return ts
}

// writeTwin writes the twin's rows of the stored tensor t, whose bytes in
// the rotated file are data: the same bytes for a tensor kept in the
// primal basis, else what its rows decode to with the rotation folded in.
// Folding the decoded values makes the pair compute the same function
// whatever the stored type.
func writeTwin(w io.Writer, t tensor, data []byte, p rotationPlan, signs map[int][]float64) error {
	if !t.ternary {
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("synth: writing %s: %w", t.name, err)
		}
		return nil
	}
	ne0 := int(t.shape[0])
	rowBytes, err := t.typ.RowBytes(int64(ne0))
	if err != nil {
		return fmt.Errorf("synth: tensor %s: %w", t.name, err)
	}
	var g headLayout
	if strings.HasSuffix(t.name, ".ssm_out.weight") {
		g = p.grouped
	}
	deq, row, out := make([]float32, ne0), make([]float64, ne0), make([]byte, 4*ne0)
	for off := 0; off < len(data); off += int(rowBytes) {
		if err := quant.DequantizeRow(t.typ, data[off:off+int(rowBytes)], deq); err != nil {
			return fmt.Errorf("synth: %s: %w", t.name, err)
		}
		for i, v := range deq {
			row[i] = float64(v)
		}
		if t.name == p.inverse {
			unrotateRow(row, p.block, signs[ne0])
		} else {
			foldRow(row, p.block, signs[ne0], g)
		}
		for i, v := range row {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(v)))
		}
		if _, err := w.Write(out); err != nil {
			return fmt.Errorf("synth: writing %s: %w", t.name, err)
		}
	}
	return nil
}

// spool writes the tensors' bytes, as gen produces them, into a scratch
// file next to path and maps it: each tensor's data, and a function that
// unmaps and removes the file.
func spool(path string, ts []tensor, gen func(io.Writer, tensor) error) ([][]byte, func(), error) {
	scratch, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".data*")
	if err != nil {
		return nil, nil, fmt.Errorf("synth: %w", err)
	}
	remove := func() {
		scratch.Close()
		os.Remove(scratch.Name())
	}
	bw := bufio.NewWriterSize(scratch, 1<<20)
	offsets := make([]int64, len(ts)+1)
	for i, t := range ts {
		if err := gen(bw, t); err != nil {
			remove()
			return nil, nil, err
		}
		size, err := t.bytes()
		if err != nil {
			remove()
			return nil, nil, err
		}
		offsets[i+1] = offsets[i] + size
	}
	if err := bw.Flush(); err != nil {
		remove()
		return nil, nil, fmt.Errorf("synth: %w", err)
	}
	all, unmap, err := mapFile(scratch, offsets[len(ts)])
	if err != nil {
		remove()
		return nil, nil, err
	}
	data := make([][]byte, len(ts))
	for i := range ts {
		data[i] = all[offsets[i]:offsets[i+1]]
	}
	return data, func() {
		unmap()
		remove()
	}, nil
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
