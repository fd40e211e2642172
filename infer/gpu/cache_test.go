package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/cogentcore/webgpu/wgpu"
)

// TestNewKVCacheDropsBoundOps replaces a backend's KV cache with a larger
// one between passes, then with a smaller one, and checks that every
// cached op follows: attention, the fused q/k norm+RoPE+store and the RoPE
// tables, which span the context, must match a backend that had the cache
// from the start. Ops that kept the old cache's bind groups read released
// buffers, and a kept angle table ends at the old context. After each
// replacement no cached op may bind an old buffer, nor run a kernel
// specialised on the old context (kernel.context), whatever it binds.
// Both decode attention paths: attn_lat (the default; its constants bake
// the context) and the split passes.
func TestNewKVCacheDropsBoundOps(t *testing.T) {
	for _, c := range []struct {
		name   string
		latMax int
	}{{"lat", latLongMaxPos}, {"split", 0}} {
		t.Run(c.name, func(t *testing.T) { newKVCacheDropsBoundOps(t, c.latMax) })
	}
}

// staleOps lists b's cached ops that bind one of old or whose kernel is
// specialised on a context other than b's cache's.
func staleOps(b *Backend, old []*wgpu.Buffer) []string {
	var stale []string
	for key, o := range b.ops {
		if o.k.context != 0 && o.k.context != b.kv.spec.Context {
			stale = append(stale, fmt.Sprintf("%s (%s) for a context of %d", key.kind, o.k.name, o.k.context))
		}
		for _, buf := range old {
			if o.binds(buf) {
				stale = append(stale, fmt.Sprintf("%s (%s) binding a replaced buffer", key.kind, o.k.name))
			}
		}
	}
	return stale
}

func newKVCacheDropsBoundOps(t *testing.T, latMax int) {
	const heads, kvHeads, hd, rows = 4, 2, 32, 100
	r := rand.New(rand.NewPCG(25, 26))
	qv, kv, vv := randFloats(r, rows*heads*hd, 1), randFloats(r, rows*kvHeads*hd, 1), randFloats(r, rows*kvHeads*hd, 1)
	nq, nk := randFloats(r, hd, 1), randFloats(r, hd, 1)
	rope := infer.Rope{HeadDim: hd, Dims: hd, Base: 1e4, FreqScale: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}
	a := infer.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: float32(1 / math.Sqrt(hd))}
	spec := func(ctx int) infer.KVSpec {
		return infer.KVSpec{Layers: 1, Context: ctx, KVHeads: kvHeads, HeadDim: hd}
	}

	type run struct {
		b            *Backend
		q, k, v, out *tensor
		qnorm, knorm infer.Weight
	}
	open := func(ctx int) *run {
		b := newTestBackend(t)
		b.latMax = latMax
		if err := b.NewKVCache(spec(ctx)); err != nil {
			t.Fatal(err)
		}
		return &run{b: b, q: b.mustTensor(t, "q", rows, heads*hd), k: b.mustTensor(t, "k", rows, kvHeads*hd),
			v: b.mustTensor(t, "v", rows, kvHeads*hd), out: b.mustTensor(t, "out", rows, heads*hd),
			qnorm: b.f32Weight(t, "qn", []int64{hd}, nq), knorm: b.f32Weight(t, "kn", []int64{hd}, nk)}
	}
	layer := func(x *run, n, pos int) []float32 {
		x.b.write(t, x.q, qv[pos*heads*hd:])
		x.b.write(t, x.k, kv[pos*kvHeads*hd:])
		x.b.write(t, x.v, vv[pos*kvHeads*hd:])
		return x.b.run(t, n, pos, func() {
			x.b.RMSNorm(x.q, x.q, x.qnorm, 1e-6)
			x.b.Rope(x.q, rope)
			x.b.RMSNorm(x.k, x.k, x.knorm, 1e-6)
			x.b.Rope(x.k, rope)
			x.b.StoreKV(0, x.k, x.v)
			x.b.Attention(x.out, x.q, 0, a)
		}, x.out)[0]
	}
	small := open(16)
	for pos := 0; pos < 8; pos++ { // decode: fused store, one-split attention
		layer(small, 1, pos)
	}
	layer(small, 8, 8) // prefill: split attention
	// grow past the rows, then shrink to just above them: each time,
	// prefill to past the old context (or near the new one's end), then
	// decode there
	for _, ctx := range []int{128, rows + 4} {
		old := []*wgpu.Buffer{small.b.kv.k, small.b.kv.v}
		for _, table := range small.b.ropes {
			old = append(old, table)
		}
		if err := small.b.NewKVCache(spec(ctx)); err != nil {
			t.Fatal(err)
		}
		if stale := staleOps(small.b, old); len(stale) > 0 {
			t.Fatalf("cache of %d: ops kept from the old cache: %q", ctx, stale)
		}
		fresh := open(ctx)
		for _, step := range []struct{ n, pos int }{{rows - 2, 0}, {1, rows - 2}, {1, rows - 1}} {
			want := layer(fresh, step.n, step.pos)
			got := layer(small, step.n, step.pos)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%d rows at %d after the cache became %d: out[%d] = %v, want %v", step.n, step.pos, ctx, i, got[i], want[i])
				}
			}
		}
	}
}
