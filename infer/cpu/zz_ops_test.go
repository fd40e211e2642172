package cpu

// TEMPORARY debugging aid (to be removed).

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

func TestZZOps(t *testing.T) {
	model, dump := os.Getenv("DUMP_MODEL"), os.Getenv("DUMP_FILE")
	if model == "" {
		t.Skip()
	}
	names, data, err := readDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	get := func(key string) []float32 {
		for i, n := range names {
			if n == key {
				return data[i]
			}
		}
		t.Fatalf("no %s", key)
		return nil
	}
	f, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hp, err := infer.ReadHyperparams(f, "qwen3")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(infer.BackendOptions{Threads: 2})
	defer b.Close()
	w := func(name string) infer.Weight {
		ti, _ := f.Tensor(name)
		wt, err := b.LoadWeight(infer.WeightData{Name: name, Type: ti.Type, Shape: ti.Shape, Data: f.Data(ti)})
		if err != nil {
			t.Fatal(err)
		}
		return wt
	}
	n := len(get("embd|GET_ROWS")) / hp.Embed
	if err := b.NewKVCache(infer.KVSpec{Layers: hp.Layers, Context: 256, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim}); err != nil {
		t.Fatal(err)
	}
	ten := func(name string, cols int, v []float32) *tensor {
		tt, _ := b.NewTensor(name, n, cols)
		ct := tt.(*tensor)
		if v != nil {
			copy(ct.data, v[len(v)-min(len(v), n*cols):])
		}
		return ct
	}
	cmp := func(label string, ours []float32, theirs []float32) {
		m := min(len(ours), len(theirs))
		ours, theirs = ours[len(ours)-m:], theirs[len(theirs)-m:]
		nd, worst, at := 0, 0.0, 0
		for j := range ours {
			if math.Float32bits(ours[j]) != math.Float32bits(theirs[j]) {
				nd++
				if d := math.Abs(float64(ours[j] - theirs[j])); d >= worst {
					worst, at = d, j
				}
			}
		}
		t.Logf("%-22s n=%6d differ=%5d worst=%.3g ours %.9g theirs %.9g", label, m, nd, worst, ours[at], theirs[at])
	}
	eps := hp.RMSEps
	qDim, kvDim := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	rope := hp.Rope
	attn := infer.Attn{Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim, Scale: float32(1 / math.Sqrt(float64(hp.HeadDim)))}
	toks := make([]int32, n)
	b.Begin(infer.Batch{Tokens: toks, Pos: 0})
	for l := 0; l < hp.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		s := func(k string) string { return strings.ReplaceAll(k, "#", strconv.Itoa(l)) }
		x := get("embd|GET_ROWS")
		if l > 0 {
			x = get(fmt.Sprintf("l_out-%d|ADD", l-1))
		}
		// attn norm
		h := ten("h", hp.Embed, nil)
		b.RMSNorm(h, ten("x", hp.Embed, x), w(p+"attn_norm.weight"), eps)
		cmp(s("attn_norm-#"), h.data, get(s("attn_norm-#|MUL")))
		q := ten("q", qDim, nil)
		b.MatMul(q, w(p+"attn_q.weight"), ten("h", hp.Embed, get(s("attn_norm-#|MUL"))))
		cmp(s("Qcur-# mm"), q.data, get(s("Qcur-#|MUL_MAT")))
		k := ten("k", kvDim, nil)
		b.MatMul(k, w(p+"attn_k.weight"), ten("h", hp.Embed, get(s("attn_norm-#|MUL"))))
		cmp(s("Kcur-# mm"), k.data, get(s("Kcur-#|MUL_MAT")))
		v := ten("v", kvDim, nil)
		b.MatMul(v, w(p+"attn_v.weight"), ten("h", hp.Embed, get(s("attn_norm-#|MUL"))))
		cmp(s("Vcur-# mm"), v.data, get(s("Vcur-#|MUL_MAT")))
		q = ten("q", qDim, get(s("Qcur-#|MUL_MAT")))
		b.RMSNorm(q, q, w(p+"attn_q_norm.weight"), eps)
		cmp(s("Qcur_normed-#"), q.data, get(s("Qcur_normed-#|MUL")))
		q = ten("q", qDim, get(s("Qcur_normed-#|MUL")))
		b.Rope(q, rope)
		cmp(s("Qcur-# rope"), q.data, get(s("Qcur-#|ROPE")))
		k = ten("k", kvDim, get(s("Kcur_normed-#|MUL")))
		b.Rope(k, rope)
		cmp(s("Kcur-# rope"), k.data, get(s("Kcur-#|ROPE")))
		b.StoreKV(l, ten("k", kvDim, get(s("Kcur-#|ROPE"))), ten("v", kvDim, get(s("Vcur-#|MUL_MAT"))))
		att := ten("att", qDim, nil)
		b.Attention(att, ten("q", qDim, get(s("Qcur-#|ROPE"))), l, attn)
		cmp(s("kqv_out-#"), att.data, get(s("kqv_out-#|CONT")))
		o := ten("o", hp.Embed, nil)
		b.MatMul(o, w(p+"attn_output.weight"), ten("att", qDim, get(s("kqv_out-#|CONT"))))
		var wo []float32
		for i, nm := range names {
			if strings.HasPrefix(nm, "node_") && strings.HasSuffix(nm, "MUL_MAT") && len(data[i]) == n*hp.Embed && wo == nil {
				if l == 0 || !strings.HasPrefix(nm, "node_32") {
					wo = data[i]
				}
			}
		}
		_ = wo
		fi := ten("fi", hp.Embed, nil)
		b.RMSNorm(fi, ten("x", hp.Embed, get(s("ffn_inp-#|ADD"))), w(p+"ffn_norm.weight"), eps)
		cmp(s("ffn_norm-#"), fi.data, get(s("ffn_norm-#|MUL")))
		g := ten("g", hp.FFN, nil)
		b.MatMul(g, w(p+"ffn_gate.weight"), ten("h", hp.Embed, get(s("ffn_norm-#|MUL"))))
		cmp(s("ffn_gate-#"), g.data, get(s("ffn_gate-#|MUL_MAT")))
		u := ten("u", hp.FFN, nil)
		b.MatMul(u, w(p+"ffn_up.weight"), ten("h", hp.Embed, get(s("ffn_norm-#|MUL"))))
		cmp(s("ffn_up-#"), u.data, get(s("ffn_up-#|MUL_MAT")))
		sw := ten("sw", hp.FFN, nil)
		b.SwiGLU(sw, ten("g", hp.FFN, get(s("ffn_gate-#|MUL_MAT"))), ten("u", hp.FFN, get(s("ffn_up-#|MUL_MAT"))))
		cmp(s("ffn_swiglu-#"), sw.data, get(s("ffn_swiglu-#|SWIGLU")))
		d := ten("d", hp.Embed, nil)
		b.MatMul(d, w(p+"ffn_down.weight"), ten("sw", hp.FFN, get(s("ffn_swiglu-#|SWIGLU"))))
		cmp(s("ffn_out-#"), d.data, get(s("ffn_out-#|MUL_MAT")))
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Begin(infer.Batch{Tokens: toks[:1], Pos: n - 1})
	last := ten("last", hp.Embed, get("l_out-1|ADD"))
	on := ten("on", hp.Embed, nil)
	b.RMSNorm(on, last, w("output_norm.weight"), eps)
	cmp("result_norm", on.data[:hp.Embed], get("result_norm|MUL"))
	lg := ten("lg", hp.Vocab, nil)
	outName := "output.weight"
	if hp.TiedOutput {
		outName = "token_embd.weight"
	}
	b.MatMul(lg, w(outName), ten("rn", hp.Embed, get("result_norm|MUL")))
	cmp("result_output", lg.data[:hp.Vocab], get("result_output|MUL_MAT"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}
