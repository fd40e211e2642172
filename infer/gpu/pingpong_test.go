package gpu

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
)

// In a chained one-token pass the recurrent state ping-pongs (recurrent's
// twins): each step gives the output and state of the same step in place,
// bit for bit, and StepBack returns the state to before the last step, so
// that step taken again in place gives the same output again; once only.
// On both DeltaNet kernels (deltanet_step.wgsl at HeadDim 32,
// deltanet.wgsl at 30, not a multiple of 4) and conv.wgsl.
func TestRecurrentPingPong(t *testing.T) {
	for _, d := range []infer.DeltaNetSpec{{KHeads: 2, VHeads: 6, HeadDim: 32}, {KHeads: 1, VHeads: 2, HeadDim: 30}} {
		t.Run(fmt.Sprintf("%d-%d-%d", d.KHeads, d.VHeads, d.HeadDim), func(t *testing.T) {
			b := newTestBackend(t)
			r := rand.New(rand.NewPCG(23, uint64(d.HeadDim)))
			kd, vd := d.KHeads*d.HeadDim, d.VHeads*d.HeadDim
			ch := 2*kd + vd
			spec := infer.RecurrentSpec{Layers: 2, Channels: ch, ConvWidth: 4, VHeads: d.VHeads, HeadDim: d.HeadDim}
			if err := b.NewRecurrentState(spec); err != nil {
				t.Fatal(err)
			}
			w := b.f32Weight(t, "conv1d", []int64{4, int64(ch)}, randFloats(r, 4*ch, 0.5))
			x, conv := b.mustTensor(t, "x", 1, ch), b.mustTensor(t, "conv", 1, ch)
			q, k, v := b.mustTensor(t, "q", 1, kd), b.mustTensor(t, "k", 1, kd), b.mustTensor(t, "v", 1, vd)
			g, beta, o := b.mustTensor(t, "g", 1, d.VHeads), b.mustTensor(t, "beta", 1, d.VHeads), b.mustTensor(t, "o", 1, vd)
			type inputs struct{ x, q, k, v, g, beta []float32 }
			steps := make([]inputs, 4)
			for i := range steps {
				in := inputs{randFloats(r, ch, 1), randFloats(r, kd, 1), randFloats(r, kd, 1), randFloats(r, vd, 1),
					make([]float32, d.VHeads), make([]float32, d.VHeads)}
				l2rows(in.q, d.HeadDim)
				l2rows(in.k, d.HeadDim)
				for h := range in.g {
					in.g[h] = -float32(softplus64(r.NormFloat64()) * 0.3)
					in.beta[h] = float32(sigmoid64(r.NormFloat64()))
				}
				steps[i] = in
			}
			// step runs one token at pos through both layers' conv and
			// DeltaNet, chained or in place, and returns the outputs
			step := func(in inputs, pos int, chained bool) []float32 {
				t.Helper()
				for _, p := range []struct {
					t *tensor
					v []float32
				}{{x, in.x}, {q, in.q}, {k, in.k}, {v, in.v}, {g, in.g}, {beta, in.beta}} {
					b.write(t, p.t, p.v)
				}
				outs := b.run(t, 1, pos, func() {
					b.chain.on = chained // the ops' encoding is all it changes here
					for l := range spec.Layers {
						b.CausalConv(conv, x, w, l)
						b.DeltaNet(o, q, k, v, g, beta, l, d)
					}
					b.chain.on = false
				}, conv, o)
				return slices.Concat(outs[0], outs[1])
			}
			start := randFloats(r, int(spec.Floats()), 0.5)
			state := func() []float32 {
				s := make([]float32, spec.Floats())
				if err := b.ReadRecurrentState(s); err != nil {
					t.Fatal(err)
				}
				return s
			}
			if err := b.WriteRecurrentState(start); err != nil {
				t.Fatal(err)
			}
			var plain [][]float32
			for i, in := range steps {
				plain = append(plain, step(in, 5+i, false))
			}
			plainState := state()
			if err := b.twins(); err != nil {
				t.Fatal(err)
			}
			if err := b.WriteRecurrentState(start); err != nil {
				t.Fatal(err)
			}
			if b.CanStepBack() {
				t.Fatal("a step back before any chained step")
			}
			for i, in := range steps {
				if got := step(in, 5+i, true); !slices.Equal(got, plain[i]) {
					t.Fatalf("chained step %d differs from the step in place", i)
				}
			}
			if !slices.Equal(state(), plainState) {
				t.Fatal("the state after chained steps differs from the state after steps in place")
			}
			if err := b.StepBack(); err != nil {
				t.Fatal(err)
			}
			if err := b.StepBack(); !errors.Is(err, infer.ErrStateMismatch) {
				t.Fatalf("a second step back: %v, want ErrStateMismatch", err)
			}
			last := len(steps) - 1
			if got := step(steps[last], 5+last, false); !slices.Equal(got, plain[last]) {
				t.Fatal("the last step taken back and again differs")
			}
			if !slices.Equal(state(), plainState) {
				t.Fatal("the state after the step taken again differs")
			}
		})
	}
}
