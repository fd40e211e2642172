package infer

import (
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/profile"
)

func init() {
	RegisterArch(Architecture{
		Name:        "qwen3",
		Hyperparams: func(f *gguf.File) (Hyperparams, error) { return ReadHyperparams(f, "qwen3") },
		Build:       buildQwen3,
	})
}

// qwen3 is the Qwen3 dense transformer (Bonsai 1.x), and the network that
// qwen2 and llama files build too (qwen2.go, llama.go):
//
//	x = embed(tokens)
//	for each layer:
//	    h = rms(x)·attn_norm
//	    q, k, v = Wq·h + bq, Wk·h + bk, Wv·h + bv           (biases: qwen2's)
//	    q, k = rms_head(q)·q_norm, rms_head(k)·k_norm      (per head; qwen3 only)
//	    q, k = rope(q), rope(k)
//	    x += Wo · attention(q, cache ∪ {k, v})
//	    h = rms(x)·ffn_norm
//	    x += Wdown · (silu(Wgate·h) ⊙ Wup·h)
//	logits = Woutput · rms(x_last)·output_norm       (Woutput = token_embd when tied)
//
// A rotated file (prism.hadamard.*) stores some W in a Hadamard basis: their
// inputs are rotated first (matmul), and embedded rows rotated back (see
// Rotator).
type qwen3 struct {
	hp      Hyperparams
	b       Backend
	attn    Attn
	embd    Weight
	outNorm Weight
	output  Weight
	layers  []qwen3Layer
	rot     *Rotator

	// Activations, MaxBatch rows each but last, logits and the last
	// layer's one-row FFN tensors.
	x, h, q, k, v, att, gate, up, last, logits Tensor
	lastH, lastGate, lastUp                    Tensor
	// rows is the output head over every token of a pass (ForwardAll).
	rows rowHead
	// rowOuts are ForwardRows' output heads (batch.go).
	rowOuts rowHeads

	// gemma3's differences (gemma3.go); zero for the others.
	gemma gemmaParts
}

type qwen3Layer struct {
	attnNorm, wq, wk, wv, qNorm, kNorm, wo Weight
	ffnNorm, wGate, wUp, wDown             Weight
	// bq, bk and bv are the projections' biases (qwen2's); nil when the
	// file has none. qNorm and kNorm are nil without q/k norms (qwen2,
	// llama).
	bq, bk, bv Weight
	// attnPost and ffnPost norm the attention's and the FFN's outputs
	// before the residual adds (gemma3's); nil for the others.
	attnPost, ffnPost Weight
}

func buildQwen3(f *gguf.File, b Backend, cfg BuildConfig) (Network, error) {
	hp, err := ReadHyperparams(f, "qwen3")
	if err != nil {
		return nil, err
	}
	return buildDense(f, b, cfg, hp, denseParts{qkNorm: true})
}

// denseParts are what a dense architecture's files have beyond the
// weights every one has.
type denseParts struct {
	qkNorm    bool // attn_q_norm, attn_k_norm per head (qwen3, gemma3)
	postNorms bool // post_attention_norm, post_ffw_norm (gemma3)
	gemma     gemmaParts
}

// buildDense binds a dense transformer of qwen3's graph: qwen3 itself
// (per-head q/k norms), qwen2 and llama, which have none but may have
// q/k/v biases and rotate by hp.Rope's mode and factors, and gemma3 (its
// parts).
func buildDense(f *gguf.File, b Backend, cfg BuildConfig, hp Hyperparams, parts denseParts) (Network, error) {
	if cfg.MaxBatch < 1 {
		return nil, fmt.Errorf("%w: batch size %d", ErrBadShape, cfg.MaxBatch)
	}
	n := &qwen3{
		hp: hp, b: b,
		attn: Attn{Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim,
			Scale: float32(1 / math.Sqrt(float64(hp.HeadDim)))},
		layers: make([]qwen3Layer, hp.Layers),
		gemma:  parts.gemma,
	}
	if hp.AttnScale != 0 {
		n.attn.Scale = hp.AttnScale
	}
	E, F, V := int64(hp.Embed), int64(hp.FFN), int64(hp.Vocab)
	qDim, kvDim := int64(hp.Heads*hp.HeadDim), int64(hp.KVHeads*hp.HeadDim)
	D := int64(hp.HeadDim)

	bind := newBinder(f, b, cfg.Progress)
	n.embd = bind.weight("token_embd.weight", E, V)
	n.outNorm = bind.weight("output_norm.weight", E)
	if hp.TiedOutput {
		n.output = n.embd
	} else {
		n.output = bind.weight("output.weight", E, V)
	}
	for i := range n.layers {
		p := fmt.Sprintf("blk.%d.", i)
		L := qwen3Layer{
			attnNorm: bind.weight(p+"attn_norm.weight", E),
			wq:       bind.weight(p+"attn_q.weight", E, qDim),
			wk:       bind.weight(p+"attn_k.weight", E, kvDim),
			wv:       bind.weight(p+"attn_v.weight", E, kvDim),
			bq:       bind.optional(p+"attn_q.bias", qDim),
			bk:       bind.optional(p+"attn_k.bias", kvDim),
			bv:       bind.optional(p+"attn_v.bias", kvDim),
			wo:       bind.weight(p+"attn_output.weight", qDim, E),
			ffnNorm:  bind.weight(p+"ffn_norm.weight", E),
			wGate:    bind.weight(p+"ffn_gate.weight", E, F),
			wUp:      bind.weight(p+"ffn_up.weight", E, F),
			wDown:    bind.weight(p+"ffn_down.weight", F, E),
		}
		if parts.qkNorm {
			L.qNorm = bind.weight(p+"attn_q_norm.weight", D)
			L.kNorm = bind.weight(p+"attn_k_norm.weight", D)
		}
		if parts.postNorms {
			L.attnPost = bind.weight(p+"post_attention_norm.weight", E)
			L.ffnPost = bind.weight(p+"post_ffw_norm.weight", E)
		}
		n.layers[i] = L
	}
	if bind.err != nil {
		return nil, bind.err
	}
	var err error
	if n.rot, err = NewRotator(f, b, cfg.MaxBatch); err != nil {
		return nil, err
	}

	B := cfg.MaxBatch
	alloc := tensorAllocator{b: b}
	n.x = alloc.tensor("x", B, hp.Embed)
	n.h = alloc.tensor("h", B, hp.Embed)
	n.q = alloc.tensor("q", B, int(qDim))
	n.k = alloc.tensor("k", B, int(kvDim))
	n.v = alloc.tensor("v", B, int(kvDim))
	n.att = alloc.tensor("attn", B, int(qDim))
	n.gate = alloc.tensor("ffn_gate", B, hp.FFN)
	n.up = alloc.tensor("ffn_up", B, hp.FFN)
	n.last = alloc.tensor("last", 1, hp.Embed)
	n.logits = alloc.tensor("logits", 1, hp.Vocab)
	n.lastH = alloc.tensor("last_h", 1, hp.Embed)
	n.lastGate = alloc.tensor("last_ffn_gate", 1, hp.FFN)
	n.lastUp = alloc.tensor("last_ffn_up", 1, hp.FFN)
	if alloc.err != nil {
		return nil, alloc.err
	}
	return n, nil
}

func (n *qwen3) Hyperparams() Hyperparams { return n.hp }

func (n *qwen3) KVSpec(ctx int) KVSpec {
	return KVSpec{Layers: n.hp.Layers, Context: ctx, KVHeads: n.hp.KVHeads, HeadDim: n.hp.HeadDim}
}

// trunk runs the embedding and the layers over the batch, leaving the
// residual stream in x: the part of a pass that Forward and ForwardAll
// share.
func (n *qwen3) trunk(batch Batch) {
	n.b.Begin(batch)
	n.blocks(false)
}

// blocks runs the embedding and the layers of a pass begun, leaving the
// last hidden states in n.x; with lastOnly, the last layer's FFN runs on
// the batch's last row alone and leaves its hidden state in n.last. That
// is llama.cpp's graph when one logit row is wanted (it keeps only the
// output rows after the last attention), and it matters beyond the saved
// work: a K-quant product rounds in another order for a row that shares it
// with three others or more (quant's gemmTokens), so the last token's FFN
// must see a product of one row, as llama.cpp's does.
func (n *qwen3) blocks(lastOnly bool) {
	b, eps := n.b, n.hp.RMSEps
	b.Phase(profile.Embed)
	n.rot.Embed(n.x, n.embd)
	if n.gemma.embScale != 0 {
		b.Scale(n.x, n.gemma.embScale)
	}

	for l, L := range n.layers {
		b.Phase(profile.QKV)
		b.RMSNorm(n.h, n.x, L.attnNorm, eps)
		n.matmul(n.q, L.wq, n.h)
		n.matmul(n.k, L.wk, n.h)
		n.matmul(n.v, L.wv, n.h)
		n.bias(n.q, L.bq)
		n.bias(n.k, L.bk)
		n.bias(n.v, L.bv)
		if L.qNorm != nil {
			b.RMSNorm(n.q, n.q, L.qNorm, eps)
			b.RMSNorm(n.k, n.k, L.kNorm, eps)
		}
		rope, attn := n.hp.Rope, n.attn
		if n.gemma.local != nil && n.gemma.local[l] {
			rope, attn.Window = n.gemma.localRope, n.gemma.window
		}
		b.Rope(n.q, rope)
		b.Rope(n.k, rope)

		b.Phase(profile.Attention)
		b.StoreKV(l, n.k, n.v)
		b.Attention(n.att, n.q, l, attn)

		b.Phase(profile.AttnOutput)
		n.matmul(n.h, L.wo, n.att)
		if L.attnPost != nil {
			b.RMSNorm(n.h, n.h, L.attnPost, eps)
		}
		b.Add(n.x, n.x, n.h)

		b.Phase(profile.FFN)
		if lastOnly && l == len(n.layers)-1 {
			b.LastRow(n.last, n.x)
			n.ffn(L, n.last, n.lastH, n.lastGate, n.lastUp)
			continue
		}
		n.ffn(L, n.x, n.h, n.gate, n.up)
	}
}

// ffn is x += Wdown · (silu(Wgate·h) ⊙ Wup·h), h = rms(x)·ffn_norm, with
// h, gate and up as scratch of x's rows.
func (n *qwen3) ffn(L qwen3Layer, x, h, gate, up Tensor) {
	b := n.b
	b.RMSNorm(h, x, L.ffnNorm, n.hp.RMSEps)
	n.matmul(gate, L.wGate, h)
	n.matmul(up, L.wUp, h)
	if n.gemma.geglu {
		b.Gate(gate, up, gate, ActGELU)
	} else {
		b.SwiGLU(gate, gate, up)
	}
	n.matmul(h, L.wDown, gate)
	if L.ffnPost != nil {
		b.RMSNorm(h, h, L.ffnPost, n.hp.RMSEps)
	}
	b.Add(x, x, h)
}

// Forward runs the layers over the batch; see the type's comment for the
// math.
func (n *qwen3) Forward(batch Batch, logits []float32) error {
	n.encode(batch)
	n.b.Read(n.logits, logits)
	return n.b.Commit()
}

// The chained passes (chainNetwork).
func (n *qwen3) embedding() Weight    { return n.embd }
func (n *qwen3) logitsTensor() Tensor { return n.logits }

// encode begins a pass over batch and encodes it up to the logits.
func (n *qwen3) encode(batch Batch) {
	n.b.Begin(batch)
	n.encodeBegun(len(batch.Tokens))
}

// encodeBegun encodes a pass of n tokens begun, up to the logits.
func (n *qwen3) encodeBegun(tokens int) {
	b, eps := n.b, n.hp.RMSEps
	// One token is its own last row: the pass keeps the graph whose
	// fusions the GPU backend knows (LastRow after the layers).
	lastOnly := tokens > 1
	n.blocks(lastOnly)

	b.Phase(profile.OutputHead)
	if !lastOnly {
		b.LastRow(n.last, n.x)
	}
	b.RMSNorm(n.last, n.last, n.outNorm, eps)
	n.matmul(n.logits, n.output, n.last)
}

// bias adds a projection's bias, if it has one.
func (n *qwen3) bias(x Tensor, b Weight) {
	if b != nil {
		n.b.AddBias(x, b)
	}
}

// matmul is dst = W·x, x first rotated when the file stores W rotated.
func (n *qwen3) matmul(dst Tensor, w Weight, x Tensor) { n.b.MatMul(dst, w, n.rot.Input(w, x)) }

// binder binds weights by name, checking their shapes, and keeps the first
// error so that a network's wiring reads as a list.
type binder struct {
	f        *gguf.File
	b        Backend
	progress func(done, total int64)
	done     int64
	total    int64
	err      error
}

func newBinder(f *gguf.File, b Backend, progress func(done, total int64)) *binder {
	var total int64
	for i := range f.Tensors {
		total += f.Tensors[i].Size
	}
	return &binder{f: f, b: b, progress: progress, total: total}
}

// optional binds a weight the file may lack: nil when it has none.
func (bd *binder) optional(name string, shape ...int64) Weight {
	if _, ok := bd.f.Tensor(name); !ok {
		return nil
	}
	return bd.weight(name, shape...)
}

func (bd *binder) weight(name string, shape ...int64) Weight {
	if bd.err != nil {
		return nil
	}
	t, ok := bd.f.Tensor(name)
	if !ok {
		bd.err = fmt.Errorf("%w: %s", ErrMissingTensor, name)
		return nil
	}
	if !equalShape(t.Shape, shape) {
		bd.err = fmt.Errorf("%w: %s is %v, want %v", ErrBadShape, name, t.Shape, shape)
		return nil
	}
	data := bd.f.Data(t)
	if data == nil {
		bd.err = fmt.Errorf("%w: %s: no data (file closed or out of range)", ErrMissingTensor, name)
		return nil
	}
	// gguf.Open sets Path and maps the file; Parse of bytes in memory does
	// neither.
	mapped := bd.f.Path != ""
	w, err := bd.b.LoadWeight(WeightData{Name: name, Type: t.Type, Shape: t.Shape, Data: data, Mapped: mapped})
	if err != nil {
		bd.err = fmt.Errorf("binding %s: %w", name, err)
		return nil
	}
	bd.done += t.Size
	if bd.progress != nil {
		bd.progress(bd.done, bd.total)
	}
	return w
}

// equalShape compares a tensor's shape with the wanted one, ignoring
// trailing ones (a vector may be stored as [n] or [n, 1]).
func equalShape(got, want []int64) bool {
	for len(got) > len(want) && got[len(got)-1] == 1 {
		got = got[:len(got)-1]
	}
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

type tensorAllocator struct {
	b   Backend
	err error
}

func (a *tensorAllocator) tensor(name string, rows, cols int) Tensor {
	if a.err != nil {
		return nil
	}
	t, err := a.b.NewTensor(name, rows, cols)
	if err != nil {
		a.err = fmt.Errorf("allocating %s (%d×%d): %w", name, rows, cols, err)
	}
	return t
}
