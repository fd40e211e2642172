package infer

import (
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/profile"
)

func init() {
	RegisterArch(Architecture{
		Name: "qwen35",
		Hyperparams: func(f *gguf.File) (Hyperparams, error) {
			p, err := ReadQwen35Params(f)
			return p.Hyperparams, err
		},
		State: func(f *gguf.File, ctx int) (KVSpec, RecurrentSpec, error) {
			p, err := ReadQwen35Params(f)
			return p.KVSpec(ctx), p.RecurrentSpec(), err
		},
		Build: buildQwen35,
	})
}

// Qwen35Params are the sizes of a qwen35 model: the dense keys (Layers
// counts the trunk's blocks, without the NextN ones) and those of its Gated
// DeltaNet layers.
type Qwen35Params struct {
	Hyperparams
	ConvKernel int     // ssm.conv_kernel: taps of the causal convolution
	StateSize  int     // ssm.state_size: the head dimension of q, k and v
	KHeads     int     // ssm.group_count
	VHeads     int     // ssm.time_step_rank
	Recurrent  []bool  // per trunk layer: a DeltaNet layer (else attention)
	NextN      int     // nextn_predict_layers: trailing MTP blocks, not run
	AttnScale  float32 // 1/√HeadDim
	Sections   [4]int  // rope.dimension_sections
}

// Channels is the width of the fused q|k|v projection and its convolution.
func (p Qwen35Params) Channels() int { return (2*p.KHeads + p.VHeads) * p.StateSize }

// AttentionLayers counts the full-attention layers of the trunk.
func (p Qwen35Params) AttentionLayers() int {
	n := 0
	for _, r := range p.Recurrent {
		if !r {
			n++
		}
	}
	return n
}

// ReadQwen35Params reads a qwen35 file's sizes as llama.cpp's loader does
// and checks that they describe a model this package can run.
func ReadQwen35Params(f *gguf.File) (Qwen35Params, error) {
	const arch = "qwen35"
	hp, err := ReadHyperparams(f, arch)
	p := Qwen35Params{Hyperparams: hp}
	if err != nil {
		return p, err
	}
	kv := f.KV
	key := func(k string) string { return arch + "." + k }
	need := func(dst *int, k string) error {
		v, ok := kv.Uint(key(k))
		if !ok {
			return fmt.Errorf("%w: %s", gguf.ErrNoKey, key(k))
		}
		if v == 0 || v > 1<<20 {
			return fmt.Errorf("%w: %s = %d", ErrBadShape, key(k), v)
		}
		*dst = int(v)
		return nil
	}
	var inner int
	for _, k := range []struct {
		dst *int
		key string
	}{
		{&p.ConvKernel, "ssm.conv_kernel"},
		{&p.StateSize, "ssm.state_size"},
		{&p.KHeads, "ssm.group_count"},
		{&p.VHeads, "ssm.time_step_rank"},
		{&inner, "ssm.inner_size"},
	} {
		if err := need(k.dst, k.key); err != nil {
			return p, err
		}
	}
	if p.VHeads%p.KHeads != 0 {
		return p, fmt.Errorf("%w: %s = %d is not a multiple of %s = %d", ErrBadShape, key("ssm.time_step_rank"), p.VHeads, key("ssm.group_count"), p.KHeads)
	}
	if inner != p.VHeads*p.StateSize {
		return p, fmt.Errorf("%w: %s = %d, want %s × %s = %d", ErrBadShape, key("ssm.inner_size"), inner, key("ssm.time_step_rank"), key("ssm.state_size"), p.VHeads*p.StateSize)
	}

	all := hp.Layers // block_count holds the NextN blocks too
	if v, ok := kv.Uint(key("nextn_predict_layers")); ok {
		if v >= uint64(all) {
			return p, fmt.Errorf("%w: %s = %d leaves no trunk of the %d blocks", ErrBadShape, key("nextn_predict_layers"), v, all)
		}
		p.NextN = int(v)
	}
	p.Layers = all - p.NextN
	p.Recurrent = make([]bool, p.Layers)
	if v, ok := kv.Get(key("attention.recurrent_layers")); ok {
		flags, isBools := v.Any().([]bool)
		if !isBools || len(flags) != all {
			return p, fmt.Errorf("%w: %s must be %d bools", ErrBadShape, key("attention.recurrent_layers"), all)
		}
		copy(p.Recurrent, flags)
	} else {
		interval := 4
		if v, ok := kv.Uint(key("full_attention_interval")); ok {
			if v == 0 || v > uint64(all) {
				return p, fmt.Errorf("%w: %s = %d", ErrBadShape, key("full_attention_interval"), v)
			}
			interval = int(v)
		}
		for i := range p.Recurrent {
			p.Recurrent[i] = (i+1)%interval != 0
		}
	}
	if p.AttentionLayers() == 0 {
		return p, fmt.Errorf("%w: no full-attention layer among the %d", ErrBadShape, p.Layers)
	}
	p.KVLayers = p.AttentionLayers()

	// llama.cpp's qwen35 loader reads no attention.scale: kq_scale is
	// always 1/√head_dim.
	p.AttnScale = float32(1 / math.Sqrt(float64(hp.HeadDim)))
	if err := p.readSections(kv, key("rope.dimension_sections")); err != nil {
		return p, err
	}
	return p, nil
}

// readSections reads the M-RoPE sections and checks that, for text, they
// reduce to NEOX RoPE on the first rope.dimension_count dims. llama.cpp's
// interleaved M-RoPE (IMROPE) gives rotated pair i the position of section
// i mod 3 (time, height, width) while i stays below three times that
// section's size, and the fourth ("extra") position otherwise. A text token
// has the same time, height and width position, and 0 as its extra one, so
// the rotation is NEOX's exactly when no pair falls to the extra position.
func (p *Qwen35Params) readSections(kv gguf.Metadata, k string) error {
	s, ok := kv.Int32s(k)
	if !ok {
		return fmt.Errorf("%w: %s", gguf.ErrNoKey, k)
	}
	if len(s) > 4 {
		return fmt.Errorf("%w: %s has %d sections, at most 4", ErrBadShape, k, len(s))
	}
	total := 0
	for i, v := range s {
		if v < 0 || v > 1<<16 {
			return fmt.Errorf("%w: %s = %v", ErrBadShape, k, s)
		}
		p.Sections[i] = int(v)
		total += int(v)
	}
	if total == 0 {
		return fmt.Errorf("%w: %s = %v sums to 0", ErrBadShape, k, s)
	}
	for i := range p.Rope.Dims / 2 {
		sector := i % total
		if sector >= 3*p.Sections[sector%3] {
			return fmt.Errorf("%w: %s = %v sends rotated pair %d to the extra position: not text RoPE", ErrUnsupportedArch, k, s, i)
		}
	}
	return nil
}

// qwen35 is the hybrid Qwen3.5 network (Bonsai 27B, Bonsai 2): Gated
// DeltaNet layers with, every few layers, a gated full-attention layer.
//
//	x = embed(tokens)
//	for each layer:
//	    h = rms(x)·attn_norm
//	    x += deltanet(h) or attention(h)
//	    h = rms(x)·post_attention_norm
//	    x += Wdown · (silu(Wgate·h) ⊙ Wup·h)
//	logits = Woutput · rms(x_last)·output_norm       (Woutput = token_embd when tied)
//
// deltanet(h), with d = ssm.state_size, per value head (key head = head mod
// KHeads):
//
//	q|k|v = silu(conv(Wqkv·h))              (causal, width ssm.conv_kernel)
//	q, k  = l2(q), l2(k)                     (per head)
//	β     = sigmoid(Wβ·h)
//	g     = softplus(Wα·h + dt_bias)·ssm_a   (ssm_a = −exp(A_log) < 0)
//	S     = exp(g)·S;  S += k·(β·(v − Sᵀk))ᵀ;  o = Sᵀq/√d
//	out   = Wssm_out · (rms_head(o)·ssm_norm ⊙ silu(Wz·h))
//
// attention(h):
//
//	q|gate = Wq·h                            (interleaved per head)
//	q, k = rms_head(q)·q_norm, rms_head(Wk·h)·k_norm
//	q, k = rope(q), rope(k)                  (first rope.dimension_count dims)
//	out  = Wo · (attention(q, cache ∪ {k, Wv·h}) ⊙ sigmoid(gate))
type qwen35 struct {
	p       Qwen35Params
	b       Backend
	attn    Attn
	delta   DeltaNetSpec
	embd    Weight
	outNorm Weight
	output  Weight
	layers  []qwen35Layer
	rot     *Rotator

	// Activations, MaxBatch rows each but last and logits (one row).
	x, h                   Tensor
	qg, q, gate, k, v, att Tensor // attention layers
	qgkv                   Tensor // their fused projection, if a file has one
	qkv, conv, z           Tensor // DeltaNet layers
	dq, dk, dv, o          Tensor
	alpha, beta            Tensor
	ffGate, ffUp           Tensor
	last, logits           Tensor
	// rows is the output head over every token of a pass (ForwardAll),
	// rowOuts ForwardRows' (batch.go).
	rows    rowHead
	rowOuts rowHeads
}

// qwen35Layer is one block; index is its ordinal among the layers of its
// kind (the KV cache layer of an attention layer, the recurrent state layer
// of a DeltaNet one).
type qwen35Layer struct {
	recurrent bool
	index     int
	attnNorm  Weight
	postNorm  Weight
	// Attention: q|gate, k and v apart, or fused in one matrix (wqgkv).
	wq, wk, wv, wqgkv, qNorm, kNorm, wo Weight
	// Gated DeltaNet.
	wqkv, wz, wAlpha, wBeta, dtBias, ssmA, conv1d, ssmNorm, ssmOut Weight
	// FFN.
	wGate, wUp, wDown Weight
}

func buildQwen35(f *gguf.File, b Backend, cfg BuildConfig) (Network, error) {
	p, err := ReadQwen35Params(f)
	if err != nil {
		return nil, err
	}
	if cfg.MaxBatch < 1 {
		return nil, fmt.Errorf("%w: batch size %d", ErrBadShape, cfg.MaxBatch)
	}
	n := &qwen35{
		p: p, b: b,
		attn:   Attn{Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Scale: p.AttnScale},
		delta:  DeltaNetSpec{KHeads: p.KHeads, VHeads: p.VHeads, HeadDim: p.StateSize},
		layers: make([]qwen35Layer, p.Layers),
	}
	E, F, V := int64(p.Embed), int64(p.FFN), int64(p.Vocab)
	D, S := int64(p.HeadDim), int64(p.StateSize)
	qDim, kvDim := int64(p.Heads)*D, int64(p.KVHeads)*D
	C, VD, VH := int64(p.Channels()), int64(p.VHeads)*S, int64(p.VHeads)

	bind := newBinder(f, b, cfg.Progress)
	n.embd = bind.weight("token_embd.weight", E, V)
	n.outNorm = bind.weight("output_norm.weight", E)
	if p.TiedOutput {
		n.output = n.embd
	} else {
		n.output = bind.weight("output.weight", E, V)
	}
	attnLayers, recLayers, fusedAttn := 0, 0, false
	for i := range n.layers {
		pre := fmt.Sprintf("blk.%d.", i)
		L := qwen35Layer{
			recurrent: p.Recurrent[i],
			attnNorm:  bind.weight(pre+"attn_norm.weight", E),
			postNorm:  bind.weight(pre+"post_attention_norm.weight", E),
		}
		if L.recurrent {
			L.index = recLayers
			recLayers++
			L.wqkv = bind.weight(pre+"attn_qkv.weight", E, C)
			L.wz = bind.weight(pre+"attn_gate.weight", E, VD)
			L.conv1d = bind.weight(pre+"ssm_conv1d.weight", int64(p.ConvKernel), C)
			L.dtBias = bind.weight(pre+"ssm_dt.bias", VH)
			L.ssmA = bind.weight(pre+"ssm_a", VH)
			L.wBeta = bind.weight(pre+"ssm_beta.weight", E, VH)
			L.wAlpha = bind.weight(pre+"ssm_alpha.weight", E, VH)
			L.ssmNorm = bind.weight(pre+"ssm_norm.weight", S)
			L.ssmOut = bind.weight(pre+"ssm_out.weight", VD, E)
		} else {
			L.index = attnLayers
			attnLayers++
			for _, b := range []string{"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_qkv.bias"} {
				if _, ok := f.Tensor(pre + b); ok {
					return nil, fmt.Errorf("%w: qwen35 with attention biases (%s%s)", ErrUnsupportedArch, pre, b)
				}
			}
			if _, fused := f.Tensor(pre + "attn_qkv.weight"); fused {
				L.wqgkv = bind.weight(pre+"attn_qkv.weight", E, 2*qDim+2*kvDim)
				fusedAttn = true
			} else {
				L.wq = bind.weight(pre+"attn_q.weight", E, 2*qDim)
				L.wk = bind.weight(pre+"attn_k.weight", E, kvDim)
				L.wv = bind.weight(pre+"attn_v.weight", E, kvDim)
			}
			L.qNorm = bind.weight(pre+"attn_q_norm.weight", D)
			L.kNorm = bind.weight(pre+"attn_k_norm.weight", D)
			L.wo = bind.weight(pre+"attn_output.weight", qDim, E)
		}
		L.wGate = bind.weight(pre+"ffn_gate.weight", E, F)
		L.wUp = bind.weight(pre+"ffn_up.weight", E, F)
		L.wDown = bind.weight(pre+"ffn_down.weight", F, E)
		n.layers[i] = L
	}
	if bind.err != nil {
		return nil, bind.err
	}
	if n.rot, err = NewRotator(f, b, cfg.MaxBatch); err != nil {
		return nil, err
	}

	B := cfg.MaxBatch
	alloc := tensorAllocator{b: b}
	n.x = alloc.tensor("x", B, p.Embed)
	n.h = alloc.tensor("h", B, p.Embed)
	n.qg = alloc.tensor("q_gate", B, int(2*qDim))
	n.q = alloc.tensor("q", B, int(qDim))
	n.gate = alloc.tensor("attn_gate", B, int(qDim))
	n.k = alloc.tensor("k", B, int(kvDim))
	n.v = alloc.tensor("v", B, int(kvDim))
	n.att = alloc.tensor("attn", B, int(qDim))
	if fusedAttn {
		n.qgkv = alloc.tensor("q_gate_k_v", B, int(2*qDim+2*kvDim))
	}
	if recLayers > 0 {
		KD := int(p.KHeads) * p.StateSize
		n.qkv = alloc.tensor("qkv", B, int(C))
		n.conv = alloc.tensor("conv", B, int(C))
		n.z = alloc.tensor("z", B, int(VD))
		n.dq = alloc.tensor("delta_q", B, KD)
		n.dk = alloc.tensor("delta_k", B, KD)
		n.dv = alloc.tensor("delta_v", B, int(VD))
		n.o = alloc.tensor("delta_out", B, int(VD))
		n.alpha = alloc.tensor("alpha", B, p.VHeads)
		n.beta = alloc.tensor("beta", B, p.VHeads)
	}
	n.ffGate = alloc.tensor("ffn_gate", B, p.FFN)
	n.ffUp = alloc.tensor("ffn_up", B, p.FFN)
	n.last = alloc.tensor("last", 1, p.Embed)
	n.logits = alloc.tensor("logits", 1, p.Vocab)
	if alloc.err != nil {
		return nil, alloc.err
	}
	return n, nil
}

func (n *qwen35) Hyperparams() Hyperparams { return n.p.Hyperparams }

// KVSpec counts the attention layers only: DeltaNet layers keep their
// recurrent state instead.
func (n *qwen35) KVSpec(ctx int) KVSpec { return n.p.KVSpec(ctx) }

func (n *qwen35) RecurrentSpec() RecurrentSpec { return n.p.RecurrentSpec() }

// KVSpec sizes the attention layers' cache for ctx tokens.
func (p Qwen35Params) KVSpec(ctx int) KVSpec {
	return KVSpec{Layers: p.AttentionLayers(), Context: ctx, KVHeads: p.KVHeads, HeadDim: p.HeadDim}
}

// RecurrentSpec sizes the DeltaNet layers' state.
func (p Qwen35Params) RecurrentSpec() RecurrentSpec {
	return RecurrentSpec{
		Layers:    len(p.Recurrent) - p.AttentionLayers(),
		Channels:  p.Channels(),
		ConvWidth: p.ConvKernel,
		VHeads:    p.VHeads,
		HeadDim:   p.StateSize,
	}
}

// matmul is every matrix product of the network: the one place where a
// weight's input basis is handled (Bonsai 2's rotation).
func (n *qwen35) matmul(dst Tensor, w Weight, x Tensor) {
	n.b.MatMul(dst, w, n.rot.Input(w, x))
}

// trunk runs the embedding and the layers over the batch, leaving the
// residual stream in x: the part of a pass that Forward and ForwardAll
// share.
func (n *qwen35) trunk(batch Batch) {
	n.b.Begin(batch)
	n.blocks()
}

// blocks runs the embedding and the layers over the pass begun.
func (n *qwen35) blocks() {
	b, eps := n.b, n.p.RMSEps
	b.Phase(profile.Embed)
	n.rot.Embed(n.x, n.embd)

	for i := range n.layers {
		L := &n.layers[i]
		b.Phase(profile.QKV)
		b.RMSNorm(n.h, n.x, L.attnNorm, eps)
		if L.recurrent {
			n.deltaNet(L)
		} else {
			n.attention(L)
		}
		b.Add(n.x, n.x, n.h)

		b.Phase(profile.FFN)
		b.RMSNorm(n.h, n.x, L.postNorm, eps)
		n.matmul(n.ffGate, L.wGate, n.h)
		n.matmul(n.ffUp, L.wUp, n.h)
		b.SwiGLU(n.ffGate, n.ffGate, n.ffUp)
		n.matmul(n.h, L.wDown, n.ffGate)
		b.Add(n.x, n.x, n.h)
	}
}

// Forward runs the layers over the batch; see the type's comment for the
// math.
func (n *qwen35) Forward(batch Batch, logits []float32) error {
	n.encode(batch)
	n.b.Read(n.logits, logits)
	return n.b.Commit()
}

// The chained passes (chainNetwork).
func (n *qwen35) embedding() Weight    { return n.embd }
func (n *qwen35) logitsTensor() Tensor { return n.logits }

// encode begins a pass over batch and encodes it up to the logits.
func (n *qwen35) encode(batch Batch) {
	n.trunk(batch)
	n.head()
}

// head encodes the output head after the trunk: the last row's logits.
func (n *qwen35) head() {
	b, eps := n.b, n.p.RMSEps
	b.Phase(profile.OutputHead)
	b.LastRow(n.last, n.x)
	b.RMSNorm(n.last, n.last, n.outNorm, eps)
	n.matmul(n.logits, n.output, n.last)
}

// attention is the gated full-attention block: h in, its output in h.
func (n *qwen35) attention(L *qwen35Layer) {
	b, eps, D, H := n.b, n.p.RMSEps, n.p.HeadDim, n.p.Heads
	if L.wqgkv != nil {
		QG, KV := 2*H*D, n.p.KVHeads*D
		n.matmul(n.qgkv, L.wqgkv, n.h)
		b.CopyCols(n.qg, n.qgkv, Cols{Dst: 0, Src: 0, Width: QG, Count: 1})
		b.CopyCols(n.k, n.qgkv, Cols{Dst: 0, Src: QG, Width: KV, Count: 1})
		b.CopyCols(n.v, n.qgkv, Cols{Dst: 0, Src: QG + KV, Width: KV, Count: 1})
	} else {
		n.matmul(n.qg, L.wq, n.h)
		n.matmul(n.k, L.wk, n.h)
		n.matmul(n.v, L.wv, n.h)
	}
	b.CopyCols(n.q, n.qg, Cols{Dst: 0, Src: 0, Width: D, Stride: 2 * D, Count: H})
	b.CopyCols(n.gate, n.qg, Cols{Dst: 0, Src: D, Width: D, Stride: 2 * D, Count: H})
	b.RMSNorm(n.q, n.q, L.qNorm, eps)
	b.RMSNorm(n.k, n.k, L.kNorm, eps)
	b.Rope(n.q, n.p.Rope)
	b.Rope(n.k, n.p.Rope)

	b.Phase(profile.Attention)
	b.StoreKV(L.index, n.k, n.v)
	b.Attention(n.att, n.q, L.index, n.attn)
	b.Gate(n.att, n.att, n.gate, ActSigmoid)

	b.Phase(profile.AttnOutput)
	n.matmul(n.h, L.wo, n.att)
}

// deltaNet is the Gated DeltaNet block: h in, its output in h.
func (n *qwen35) deltaNet(L *qwen35Layer) {
	b, eps, S := n.b, n.p.RMSEps, n.p.StateSize
	KD, VD := n.p.KHeads*S, n.p.VHeads*S
	n.matmul(n.qkv, L.wqkv, n.h)
	n.matmul(n.z, L.wz, n.h)
	in := DeltaNetInputs{Q: n.dq, K: n.dk, V: n.dv, QKV: n.qkv, Beta: n.beta, Alpha: n.alpha,
		Conv: L.conv1d, DTBias: L.dtBias, SSMA: L.ssmA, Layer: L.index, Spec: n.delta, Eps: eps}
	fuser, ok := b.(DeltaNetInputFuser)
	// the gates' projections inside the fused op where the backend can;
	// their input goes through the rotation as any matmul's does
	projected := false
	if ok {
		if x := n.rot.Input(L.wBeta, n.h); n.rot.Input(L.wAlpha, n.h) == x {
			withProj := in
			withProj.X, withProj.WBeta, withProj.WAlpha = x, L.wBeta, L.wAlpha
			projected = fuser.FuseDeltaNetInputs(withProj)
		}
	}
	if !projected {
		n.matmul(n.beta, L.wBeta, n.h)
		n.matmul(n.alpha, L.wAlpha, n.h)
	}
	if !projected && (!ok || !fuser.FuseDeltaNetInputs(in)) {
		b.Unary(n.beta, n.beta, ActSigmoid)
		b.DecayGate(n.alpha, n.alpha, L.dtBias, L.ssmA)

		b.CausalConv(n.conv, n.qkv, L.conv1d, L.index)
		b.Unary(n.conv, n.conv, ActSiLU)
		b.CopyCols(n.dq, n.conv, Cols{Dst: 0, Src: 0, Width: KD, Count: 1})
		b.CopyCols(n.dk, n.conv, Cols{Dst: 0, Src: KD, Width: KD, Count: 1})
		b.CopyCols(n.dv, n.conv, Cols{Dst: 0, Src: 2 * KD, Width: VD, Count: 1})
		b.L2Norm(n.dq, n.dq, S, eps)
		b.L2Norm(n.dk, n.dk, S, eps)
	}

	b.Phase(profile.Attention)
	b.DeltaNet(n.o, n.dq, n.dk, n.dv, n.alpha, n.beta, L.index, n.delta)
	b.RMSNorm(n.o, n.o, L.ssmNorm, eps)
	// o ⊙ silu(z), written as the FFN's SwiGLU (the same product): a
	// backend that rounds a SwiGLU for the matmul that reads it does so
	// here too.
	b.SwiGLU(n.z, n.z, n.o)

	b.Phase(profile.AttnOutput)
	n.matmul(n.h, L.ssmOut, n.z)
}
