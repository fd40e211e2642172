package synth

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	_ "github.com/bonsai-chat/bonsai/infer/cpu" // runs both files of a pair
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// denseRotate is H(s ⊙ P(x)) from the definitions: P by head indices, H as
// the dense block-diagonal matrix of (−1)^popcount(i&j)/√block.
func denseRotate(x []float64, block int, s []float64, g headLayout) []float64 {
	n := len(x)
	p := make([]float64, n)
	for c := range n {
		from := c
		if g.headDim > 0 {
			rep := n / g.headDim / g.kHeads
			grouped := c / g.headDim // = k·rep + r
			k, r := grouped/rep, grouped%rep
			from = (r*g.kHeads+k)*g.headDim + c%g.headDim
		}
		p[c] = s[c] * x[from]
	}
	out := make([]float64, n)
	for i := range n {
		for j := range n {
			if i/block != j/block {
				continue
			}
			h := 1 / math.Sqrt(float64(block))
			if bits.OnesCount(uint(i%block&(j%block)))%2 == 1 {
				h = -h
			}
			out[i] += h * p[j]
		}
	}
	return out
}

// Folding a matrix gives the same function: W_stored·H(s ⊙ P(x)) = W_twin·x,
// and the rotated-back embedding row is s ⊙ H(z).
func TestFoldRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		name  string
		n     int
		block int
		g     headLayout
	}{
		{"one block", 16, 16, headLayout{}},
		{"several blocks", 48, 8, headLayout{}},
		// 6 heads of 4 over 2 K heads: P crosses blocks of 8.
		{"grouped V heads", 24, 8, headLayout{headDim: 4, kHeads: 2}},
		{"grouped, one K head", 32, 16, headLayout{headDim: 8, kHeads: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := randomSigns(uint64(c.n), c.n)
			x := make([]float64, c.n)
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			rx := denseRotate(x, c.block, s, c.g)
			for range 5 { // rows of W
				w := make([]float64, c.n)
				for i := range w {
					w[i] = float64(rng.IntN(3) - 1)
				}
				var stored float64
				for i := range w {
					stored += w[i] * rx[i]
				}
				foldRow(w, c.block, s, c.g)
				var twin float64
				for i := range w {
					twin += w[i] * x[i]
				}
				if math.Abs(stored-twin) > 1e-12*float64(c.n) {
					t.Fatalf("W_stored·H(s⊙P(x)) = %.15g, W_twin·x = %.15g", stored, twin)
				}
			}
			if c.g.headDim > 0 {
				return
			}
			z := append([]float64(nil), x...)
			unrotateRow(z, c.block, s)
			hz := denseRotate(x, c.block, ones(c.n), headLayout{})
			for i := range z {
				if want := s[i] * hz[i]; math.Abs(z[i]-want) > 1e-12 {
					t.Fatalf("embedding row %d: %g, want s⊙H(z) = %g", i, z[i], want)
				}
			}
		})
	}
}

func ones(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func rotatedSmall(typ gguf.Type) RotatedOptions {
	o := small(typ)
	o.Shape.Tied = false
	return RotatedOptions{Options: o, Block: 64, Unrotated: []string{"blk.1.attn_k.weight"}}
}

// rotatedHybrid is the tiny qwen35 shape, untied, in blocks of 64: one
// DeltaNet head each, so that regrouping the heads before ssm_out moves
// values across blocks.
func rotatedHybrid(typ gguf.Type) RotatedOptions {
	s := Qwen35Shapes["tiny"]
	s.Vocab, s.Tied = 1024, false
	return RotatedOptions{Options: Options{Shape: s, Type: typ, Seed: 7}, Block: 64}
}

// Bonsai 2's own layout, from the 27B plan without
// writing it: blocks of 1024, signs for 5120, 6144 and 17408, and 401
// listed weights, the gates' projections and conv kernels not among them.
func TestRotationLayoutOfBonsai2(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.PTQ1_0, gguf.PQ2_0} {
		o := RotatedOptions{Options: Options{Shape: Qwen35Shapes["27b"], Type: typ}}
		ts := plan(o.Shape, o.Type, DefaultLogitStd)
		p, err := o.rotationPlan(ts)
		if err != nil {
			t.Fatal(err)
		}
		widths, listed, err := p.layout(ts)
		if err != nil {
			t.Fatal(err)
		}
		if p.block != BonsaiBlock || fmt.Sprint(widths) != "[5120 6144 17408]" || len(listed) != 401 {
			t.Errorf("%s: block %d, widths %v, %d weights listed; want 1024, [5120 6144 17408], 401", typ, p.block, widths, len(listed))
		}
		if p.grouped != (headLayout{headDim: 128, kHeads: 16}) {
			t.Errorf("%s: ssm_out regrouped as %+v", typ, p.grouped)
		}
		for _, n := range listed {
			for _, never := range []string{"ssm_alpha", "ssm_beta", "ssm_conv1d", "token_embd", "norm"} {
				if strings.Contains(n, never) {
					t.Errorf("%s: weight_names lists %s", typ, n)
				}
			}
		}
	}
	// A shape whose widths 1024 does not divide takes the largest block
	// that divides them all.
	o := rotatedHybrid(gguf.PTQ1_0)
	o.Block = 0
	p, err := o.rotationPlan(plan(o.Shape, o.Type, DefaultLogitStd))
	if err != nil || p.block != 256 {
		t.Errorf("tiny qwen35: block %d, %v; want 256", p.block, err)
	}
}

func TestWriteRotatedQwen35(t *testing.T) {
	rot, twin := writePair(t, rotatedHybrid(gguf.PTQ1_0))
	spec, err := infer.ReadHadamard(rot)
	if err != nil || spec == nil {
		t.Fatalf("rotated file's metadata: %v, %v", spec, err)
	}
	if g, ok := rot.KV.Bool("prism.hadamard.gdn_v_grouped"); !ok || !g {
		t.Error("gdn_v_grouped is not set")
	}
	names, _ := rot.KV.Strings("prism.hadamard.weight_names")
	// 4 DeltaNet layers × 6 + 2 attention layers × 7 + output.
	if len(names) != 39 {
		t.Errorf("%d weight names, want 39", len(names))
	}
	for i := range rot.Tensors {
		r := &rot.Tensors[i]
		tw, _ := twin.Tensor(r.Name)
		primal := strings.HasSuffix(r.Name, ".ssm_alpha.weight") || strings.HasSuffix(r.Name, ".ssm_beta.weight") || strings.HasSuffix(r.Name, ".ssm_conv1d.weight") || len(r.Shape) < 2
		switch {
		case primal && (tw.Type != r.Type || !bytes.Equal(rot.Data(r), twin.Data(tw))):
			t.Errorf("%s (%s) differs in the twin (%s)", r.Name, r.Type, tw.Type)
		case !primal && (r.Type != gguf.PTQ1_0 || tw.Type != gguf.F32):
			t.Errorf("%s stored as %s, twin %s", r.Name, r.Type, tw.Type)
		}
		if strings.HasSuffix(r.Name, ".ssm_alpha.weight") && r.Type != gguf.BF16 {
			t.Errorf("%s is %s, want BF16 as in Bonsai 2", r.Name, r.Type)
		}
		if strings.HasSuffix(r.Name, ".ssm_a") {
			for off := 0; off < len(rot.Data(r)); off += 4 {
				if v := math.Float32frombits(binary.LittleEndian.Uint32(rot.Data(r)[off:])); !(v < 0) {
					t.Fatalf("%s holds %g: ssm_a = −exp(A_log) must be negative", r.Name, v)
				}
			}
		}
	}
}

func writePair(t *testing.T, o RotatedOptions) (rotated, twin *gguf.File) {
	t.Helper()
	dir := t.TempDir()
	rp, tp := filepath.Join(dir, "rotated.gguf"), filepath.Join(dir, "twin.gguf")
	if err := WriteRotated(rp, tp, o); err != nil {
		t.Fatal(err)
	}
	open := func(p string) *gguf.File {
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	return open(rp), open(tp)
}

func TestWriteRotatedPair(t *testing.T) {
	rot, twin := writePair(t, rotatedSmall(gguf.Q8_0))
	spec, err := infer.ReadHadamard(rot)
	if err != nil || spec == nil {
		t.Fatalf("rotated file's metadata: %v, %v", spec, err)
	}
	if spec.Block != 64 || len(spec.Widths()) != 2 {
		t.Errorf("block %d, widths %v; want 64 and the hidden and FFN widths", spec.Block, spec.Widths())
	}
	if spec, err := infer.ReadHadamard(twin); spec != nil || err != nil {
		t.Errorf("the twin has rotation metadata: %v, %v", spec, err)
	}
	names, _ := rot.KV.Strings("prism.hadamard.weight_names")
	for _, n := range names {
		if n == "blk.1.attn_k.weight" || n == "token_embd.weight" {
			t.Errorf("weight_names lists %s", n)
		}
	}
	// 2 layers × 7 matrices − 1 unrotated + output.
	if len(names) != 14 {
		t.Errorf("%d weight names, want 14", len(names))
	}
	for i := range rot.Tensors {
		r := &rot.Tensors[i]
		tw, ok := twin.Tensor(r.Name)
		if !ok {
			t.Fatalf("twin lacks %s", r.Name)
		}
		if len(r.Shape) == 2 && r.Type != gguf.Q8_0 {
			t.Errorf("%s stored as %s", r.Name, r.Type)
		}
		if len(r.Shape) < 2 || r.Name == "blk.1.attn_k.weight" {
			// Norms and unrotated weights: the same in both files.
			if tw.Type != r.Type || !bytes.Equal(rot.Data(r), twin.Data(tw)) {
				t.Errorf("twin's %s (%s) differs from the rotated file's (%s)", r.Name, tw.Type, r.Type)
			}
			continue
		}
		if tw.Type != gguf.F32 {
			t.Errorf("twin's %s is %s", r.Name, tw.Type)
		}
		// The stored rows are ternary times one scale per row.
		{
			row := make([]float32, r.Shape[0])
			if err := quant.DequantizeRow(r.Type, rot.Data(r)[:r.RowBytes()], row); err != nil {
				t.Fatal(err)
			}
			var scale float32
			for _, v := range row {
				if v != 0 && scale == 0 {
					scale = float32(math.Abs(float64(v)))
				}
				if v != 0 && float32(math.Abs(float64(v))) != scale {
					t.Fatalf("%s row 0 is not ternary: %v and %v", r.Name, scale, v)
				}
			}
		}
	}

	tied := rotatedSmall(gguf.F32)
	tied.Shape.Tied = true
	if err := WriteRotated(filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b"), tied); !errors.Is(err, ErrRotatedShape) {
		t.Errorf("tied output: %v, want ErrRotatedShape", err)
	}
	bad := rotatedSmall(gguf.F32)
	bad.Block = 48
	if err := WriteRotated(filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b"), bad); !errors.Is(err, ErrRotatedShape) {
		t.Errorf("block 48: %v, want ErrRotatedShape", err)
	}
}

// bonsai on the rotated file computes what it computes on the twin: the
// rotation runs in the backend for the one and is folded into the weights
// for the other. Stored in F32 both sides multiply f32 activations, and only
// the f32 roundings of the fold and of the butterflies differ. Stored in
// Q8_0, the rotated side quantizes its rotated activations to 8 bits and the
// twin's F32 side does not, which moves every logit by a few 8-bit steps
// (without any rotation a Q8_0 model and its F32 dequantization differ as
// much): the largest logits must agree within the parity tests' tolerance
// for that step, and the greedy token where its margin exceeds it.
//
// The qwen35 cases add what Bonsai 2 adds: ssm_alpha and ssm_beta (BF16,
// unlisted) read the primal h beside the rotated q|k|v and z, and ssm_out
// reads the DeltaNet output regrouped; stored in PTQ1_0 and PQ2_0, whose
// activations are Q8_0 as well.
func TestRotatedMatchesTwinOnCPU(t *testing.T) {
	for _, c := range []struct {
		name string
		o    RotatedOptions
		tol  float64 // relative to |logit|+1
	}{
		{"F32", rotatedSmall(gguf.F32), 1e-4},
		{"Q8_0", rotatedSmall(gguf.Q8_0), 8.0 / 128},
		{"qwen35-F32", rotatedHybrid(gguf.F32), 1e-4},
		{"qwen35-PTQ1_0", rotatedHybrid(gguf.PTQ1_0), 8.0 / 128},
		{"qwen35-PQ2_0", rotatedHybrid(gguf.PQ2_0), 8.0 / 128},
	} {
		t.Run(c.name, func(t *testing.T) {
			rot, twin := writePair(t, c.o)
			logits := func(f *gguf.File) []float32 {
				m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 64, Threads: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				if err := m.Forward([]int32{17, 300, 5, 999, 42, 7}, 0); err != nil {
					t.Fatal(err)
				}
				if err := m.Forward([]int32{64}, 6); err != nil {
					t.Fatal(err)
				}
				return append([]float32(nil), m.Logits()...)
			}
			lr, lt := logits(rot), logits(twin)
			top := topIDs(lt, 32)
			worst := 0.0
			for _, i := range top {
				d := math.Abs(float64(lr[i]-lt[i])) / (math.Abs(float64(lt[i])) + 1)
				worst = math.Max(worst, d)
			}
			if worst > c.tol {
				t.Fatalf("rotated and twin logits differ by %.3g·(|logit|+1), more than %.3g", worst, c.tol)
			}
			margin := float64(lt[top[0]] - lt[top[1]])
			decisive := margin > c.tol*(math.Abs(float64(lt[top[0]]))+math.Abs(float64(lt[top[1]]))+2)
			if a := argmax(lr); a != top[0] && decisive {
				t.Fatalf("greedy token %d on the rotated file, %d on the twin (margin %.3g)", a, top[0], margin)
			}
			t.Logf("worst top-32 logit difference %.3g·(|logit|+1); greedy decisive: %v", worst, decisive)
		})
	}
}

// topIDs are the indices of the k largest values, largest first.
func topIDs(x []float32, k int) []int {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return x[idx[a]] > x[idx[b]] })
	return idx[:k]
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
