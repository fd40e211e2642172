package gpu

import (
	"errors"
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
	"github.com/cogentcore/webgpu/wgpu"
)

// The KV cache, RoPE and the stores into the cache.
//
// K and V are each f16 or Q8_0 (infer.KVTypes). A Q8_0 side follows
// llama.cpp's flash attention over a quantized cache, as infer/cpu does:
// rows rotated by a Walsh–Hadamard block before they are quantized, the
// query rotated alike and quantized to Q8_0 for integer dots with a Q8_0
// K, softmax weights meeting a Q8_0 V in f32 and the output rotated back.
// The kernels read the int8 words and scales straight from the cache
// (kv_q8.wgsli), the same dispatches as with f16. Its online softmax and
// f16 accumulation are not followed: the GPU keeps its split passes'
// softmax, so it agrees with the CPU within the GPU's usual tolerance
// (TestQ8KVMatchesCPU), not bit for bit.

type kvCache struct {
	spec infer.KVSpec
	k, v *wgpu.Buffer
}

// layerWords is the u32 words a layer of a cache of type t takes: f16
// values two to a word, or Q8_0 as kv_q8.wgsli lays it out (int8 values
// four to a word, then each head's ⌈D/64⌉ words of f16 block scales).
func layerWords(s infer.KVSpec, t infer.KVType) int {
	kvd := s.KVHeads * s.HeadDim
	if t == infer.KVQ8_0 {
		return s.Context * (kvd/4 + s.KVHeads*((s.HeadDim+63)/64))
	}
	return s.Context * kvd / 2
}

// kvRotation is the Walsh–Hadamard block llama.cpp rotates a Q8_0 K (k)
// or V (v) of head size dim by (0: none), as infer/cpu does: with a head
// size a multiple of 64, K by the largest power of two dividing it, V by
// 64.
func kvRotation(t infer.KVType, dim int, k bool) int {
	if t != infer.KVQ8_0 || dim%64 != 0 {
		return 0
	}
	if !k {
		return 64
	}
	n := 64
	for dim%(2*n) == 0 {
		n *= 2
	}
	return n
}

// rotScale is 1/√n as llama.cpp's FWHT scales a block of n (1 for none).
func rotScale(n int) float32 {
	if n == 0 {
		return 1
	}
	return 1 / float32(math.Sqrt(float64(n)))
}

// kvDefs adds to d the constants and flags of kv_q8.wgsli for layer's
// binding (kvBind), where K or V is Q8_0; d must hold D and KVD.
func (b *Backend) kvDefs(d map[string]shaders.Const, layer int) map[string]shaders.Const {
	s := b.kv.spec
	if !s.Quantized() {
		return d
	}
	kr, vr := kvRotation(s.K, s.HeadDim, true), kvRotation(s.V, s.HeadDim, false)
	d["KVQ"], d["KQ8"], d["VQ8"] = shaders.Flag(true), shaders.Flag(s.K == infer.KVQ8_0), shaders.Flag(s.V == infer.KVQ8_0)
	d["VROTATE"] = shaders.Flag(vr > 0)
	d["KROT"], d["KRS"], d["VROT"], d["VRS"] = shaders.U32(kr), shaders.F32(rotScale(kr)), shaders.U32(vr), shaders.F32(rotScale(vr))
	d["Q8_OFF"], d["SOFF"] = shaders.U32(b.kvQ8Off(layer)), shaders.U32(s.Context*s.KVHeads*s.HeadDim/4)
	return d
}

// kvQ8Off is the first u32 word of layer's rows in a Q8_0 side's binding
// (kvBind): 0 where it binds the layer at an offset.
func (b *Backend) kvQ8Off(layer int) int {
	if b.kvPerLayer() {
		return 0
	}
	return layer * layerWords(b.kv.spec, infer.KVQ8_0)
}

func (b *Backend) NewKVCache(spec infer.KVSpec) error {
	if spec.Layers <= 0 || spec.Context <= 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 || spec.HeadDim%2 != 0 {
		return fmt.Errorf("gpu: KV cache %+v: %w", spec, infer.ErrBadShape)
	}
	if err := spec.Check(); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if b.kv != nil {
		// Every op binding the old cache is stale. For a cache of
		// another size, so are the RoPE angle tables, which span the old
		// context, and every op whose kernel bakes the old context into
		// its offsets, whatever it binds.
		b.dropOps(b.kv.k, b.kv.v)
		if b.kv.spec.Context != spec.Context {
			for r, t := range b.ropes {
				b.dropOps(t)
				t.Release()
				delete(b.ropes, r)
			}
			b.dropOpsWhere(func(o *op) bool { return o.k.context != 0 })
		}
		b.kv.k.Release()
		b.kv.v.Release()
		b.kv = nil
	}
	kBytes := 4 * uint64(spec.Layers) * uint64(layerWords(spec, spec.K))
	vBytes := 4 * uint64(spec.Layers) * uint64(layerWords(spec, spec.V))
	if max(kBytes, vBytes) > b.d.Limits.MaxStorageBufferBindingSize {
		return fmt.Errorf("gpu: KV cache of %d MiB per K/V exceeds the %d MiB storage binding: %w",
			max(kBytes, vBytes)>>20, b.d.Limits.MaxStorageBufferBindingSize>>20, ErrOutOfMemory)
	}
	k, err := b.d.newBuffer("kcache", kBytes, storageUsage)
	if err != nil {
		return err
	}
	v, err := b.d.newBuffer("vcache", vBytes, storageUsage)
	if err != nil {
		k.Release()
		return err
	}
	b.kv = &kvCache{spec: spec, k: k, v: v}
	return nil
}

// normRopeThreads is norm_rope.wgsl's workgroup size for a head.
func normRopeThreads(headDim int) int {
	wg := 32
	for wg < headDim/2 && wg < 256 {
		wg *= 2
	}
	return wg
}

// normRope encodes a per-head RMSNorm and Rope in place (a vNormRope).
func (b *Backend) normRope(v value) {
	x, r, w, eps, ctx := v.dst, v.rope, v.w, v.eps, b.kv.spec.Context
	o := b.prepared(b.rowsKey(opKey{kind: "normrope", a: x, b: r, c: w, f: eps}), func() (*kernel, []binding, error) {
		defs := map[string]shaders.Const{
			"COLS": shaders.U32(x.cols), "HEAD_DIM": shaders.U32(r.HeadDim), "DIMS": shaders.U32(r.Dims),
			"EPS": shaders.F32(eps), "WG": shaders.U32(normRopeThreads(r.HeadDim)), "XROWS": shaders.U32(x.rows), "CTX": shaders.U32(ctx)}
		bufs := b.withRows(defs, []binding{whole(b.batchBuf), whole(w.chunks[0].buf), whole(v.table), whole(x.buf)})
		k, err := b.d.kernel("norm_rope", defs)
		return k, bufs, err
	})
	b.dispatch(o, x.cols/r.HeadDim, b.active(x), 1)
}

// qkRopeStore encodes a vQKStore, q's and k's norm+Rope with the store of
// k and v, as one qk_rope_store dispatch (fuse checked the shapes).
func (b *Backend) qkRopeStore(p value) {
	q, k, v, layer, r := p.dst, p.src, p.up, p.layer, p.rope
	s := b.kv.spec
	kvd := s.KVHeads * s.HeadDim
	kc, vc, off := b.kvBind(layer)
	o := b.prepared(b.rowsKey(opKey{kind: "qkropestore", a: q, b: k, c: v, d: p.w, e: p.kw, g: r, i: layer, f: p.eps}), func() (*kernel, []binding, error) {
		defs := b.kvDefs(map[string]shaders.Const{
			"QCOLS": shaders.U32(q.cols), "KVD": shaders.U32(kvd), "HEAD_DIM": shaders.U32(r.HeadDim), "DIMS": shaders.U32(r.Dims),
			"QEPS": shaders.F32(p.eps), "KEPS": shaders.F32(p.keps), "WG": shaders.U32(normRopeThreads(r.HeadDim)),
			"XROWS": shaders.U32(q.rows), "CTX": shaders.U32(s.Context), "QHEADS": shaders.U32(q.cols / r.HeadDim),
			"LAYER_OFF": shaders.U32(off), "D": shaders.U32(s.HeadDim)}, layer)
		bufs := b.withRows(defs, []binding{whole(b.batchBuf), whole(p.w.chunks[0].buf), whole(p.kw.chunks[0].buf), whole(p.table),
			whole(q.buf), whole(k.buf), whole(v.buf), kc, vc})
		kern, err := b.d.kernel("qk_rope_store", defs)
		return kern, bufs, err
	})
	b.dispatch(o, q.cols/r.HeadDim+s.KVHeads, b.active(q), 1)
}

// Rope is recorded: fuse makes it one norm+RoPE with a per-head norm
// waiting on x, which may wait for the StoreKV after it (normRope).
func (b *Backend) Rope(xT infer.Tensor, r infer.Rope) {
	if b.err != nil || b.enc == nil {
		return
	}
	x := b.asTensor("Rope", xT)
	if x == nil {
		return
	}
	if r.HeadDim <= 0 || r.Dims <= 0 || r.Dims > r.HeadDim || r.Dims%2 != 0 || x.cols%r.HeadDim != 0 ||
		(r.Factors != nil && len(r.Factors.Values) != r.Dims/2) {
		b.shapeErr("Rope: head %d, dims %d over rows of %d", r.HeadDim, r.Dims, x.cols)
		return
	}
	if b.kv == nil {
		b.fail(errors.New("gpu: Rope before NewKVCache (the angle table spans the cache's context)"))
		return
	}
	table, ok := b.ropes[r]
	if !ok {
		ctx := b.kv.spec.Context
		half := r.Dims / 2
		vals := make([]float32, 2*half*ctx)
		cos, sin := make([]float32, half), make([]float32, half)
		for p := 0; p < ctx; p++ {
			r.Angles(p, cos, sin)
			for j := 0; j < half; j++ {
				vals[2*(p*half+j)] = cos[j]
				vals[2*(p*half+j)+1] = sin[j]
			}
		}
		buf, err := b.d.upload("rope", floatsToBytes(vals))
		if err != nil {
			b.fail(err)
			return
		}
		b.ropes[r] = buf
		table = buf
	}
	// q's and k's norm+RoPE wait for the StoreKV after them
	b.record(node{op: opRope, x: x, rope: r, table: table, lazy: !b.noFuse && r.HeadDim <= 1024})
}

// rope encodes a Rope of its own, in place.
func (b *Backend) rope(x *tensor, r infer.Rope, table *wgpu.Buffer) {
	ctx := b.kv.spec.Context
	o := b.prepared(b.rowsKey(opKey{kind: "rope", a: x, b: r}), func() (*kernel, []binding, error) {
		defs := map[string]shaders.Const{
			"COLS": shaders.U32(x.cols), "HEAD_DIM": shaders.U32(r.HeadDim), "DIMS": shaders.U32(r.Dims),
			"XROWS": shaders.U32(x.rows), "CTX": shaders.U32(ctx), "NORMAL": shaders.Flag(r.Mode == infer.RopeNormal)}
		bufs := b.withRows(defs, []binding{whole(b.batchBuf), whole(table), whole(x.buf)})
		k, err := b.d.kernel("rope", defs)
		return k, bufs, err
	})
	b.dispatch(o, ceilDiv(x.cols/r.HeadDim*r.Dims/2, 64), b.active(x), 1)
}

// StoreKV is recorded: fuse makes it one qk_rope_store with q's and k's
// waiting norm+RoPEs, which in decode may wait for the Attention after it
// (qkRopeStore).
func (b *Backend) StoreKV(layer int, kT, vT infer.Tensor) {
	if b.err != nil || b.enc == nil {
		return
	}
	k, v := b.asTensor("StoreKV k", kT), b.asTensor("StoreKV v", vT)
	if k == nil || v == nil {
		return
	}
	n := node{op: opStoreKV, x: k, y: v, layer: layer}
	if b.kv != nil {
		s := b.kv.spec
		kvd := s.KVHeads * s.HeadDim
		if k.cols == kvd && v.cols == kvd && layer >= 0 && layer < s.Layers {
			n.headDim = s.HeadDim
		}
		// In decode over several splits, or where attn_lat may take it,
		// the Attention after it takes it into attn_qk or attn_lat.
		n.lazy = b.n == 1 && (b.splits > 1 || b.batch.Pos < b.latMax) && !b.noFuse && !b.rows
	}
	b.record(n)
}

// storeKV encodes a StoreKV of its own.
func (b *Backend) storeKV(layer int, k, v *tensor) {
	if b.kv == nil {
		b.fail(errors.New("gpu: StoreKV before NewKVCache"))
		return
	}
	s := b.kv.spec
	kvd := s.KVHeads * s.HeadDim
	if layer < 0 || layer >= s.Layers || k.cols != kvd || v.cols != kvd {
		b.shapeErr("StoreKV: layer %d of %d, k/v of %d/%d columns, cache rows of %d", layer, s.Layers, k.cols, v.cols, kvd)
		return
	}
	rows := min(k.rows, v.rows)
	n := min(rows, b.n)
	kc, vc, off := b.kvBind(layer)
	if s.Quantized() {
		o := b.prepared(b.rowsKey(opKey{kind: "storekvq8", a: k, b: v, i: layer}), func() (*kernel, []binding, error) {
			defs := b.kvDefs(map[string]shaders.Const{
				"D": shaders.U32(s.HeadDim), "KVD": shaders.U32(kvd), "XROWS": shaders.U32(rows), "CTX": shaders.U32(s.Context),
				"LAYER_OFF": shaders.U32(off), "WG": shaders.U32(64)}, layer)
			bufs := b.withRows(defs, []binding{whole(b.batchBuf), whole(k.buf), whole(v.buf), kc, vc})
			kern, err := b.d.kernel("store_kv_q8", defs)
			return kern, bufs, err
		})
		b.dispatch(o, s.KVHeads, n, 1)
		return
	}
	o := b.prepared(b.rowsKey(opKey{kind: "storekv", a: k, b: v, i: layer}), func() (*kernel, []binding, error) {
		defs := map[string]shaders.Const{
			"KVD": shaders.U32(kvd), "XROWS": shaders.U32(rows), "CTX": shaders.U32(s.Context),
			"LAYER_OFF": shaders.U32(off)}
		bufs := b.withRows(defs, []binding{whole(b.batchBuf), whole(k.buf), whole(v.buf), kc, vc})
		kern, err := b.d.kernel("store_kv", defs)
		return kern, bufs, err
	})
	b.dispatch(o, ceilDiv(kvd/2, 64), n, 1)
}

// kvBind binds layer's rows of the K and V cache: at a binding offset
// where the layer's bytes allow one, so that every layer shares one
// pipeline per kernel (a constant offset compiled each attention kernel
// once per layer, all of them on the first decode past one split), else
// the whole buffers with the layer's first u32 word as the constant
// LAYER_OFF (returned).
//
// With a Q8_0 K or V the layer's first word of a Q8_0 side is kvDefs's
// Q8_OFF (an f16 side's stays LAYER_OFF); both are bound at an offset only
// where both layers' bytes allow it.
func (b *Backend) kvBind(layer int) (k, v binding, off int) {
	s := b.kv.spec
	kvd := s.KVHeads * s.HeadDim
	// a pass over rows binds its sequence's region (BeginRows checked
	// that the cache is f16 and the shift aligned)
	shift := uint64(0)
	if b.kvBase != 0 {
		shift = b.kvShift(b.kvBase)
	}
	if b.kvPerLayer() {
		kb, vb := 4*uint64(layerWords(s, s.K)), 4*uint64(layerWords(s, s.V))
		return binding{buf: b.kv.k, offset: uint64(layer)*kb + shift, size: kb - shift}, binding{buf: b.kv.v, offset: uint64(layer)*vb + shift, size: vb - shift}, 0
	}
	k, v = whole(b.kv.k), whole(b.kv.v)
	k.offset, k.size, v.offset, v.size = shift, k.size-shift, shift, v.size-shift
	return k, v, layer * s.Context * kvd / 2
}

// kvPerLayer says kvBind binds a layer's K and V at an offset.
func (b *Backend) kvPerLayer() bool {
	s := b.kv.spec
	align := uint64(max(256, b.d.Limits.MinStorageBufferOffsetAlignment))
	return uint64(4*layerWords(s, s.K))%align == 0 && uint64(4*layerWords(s, s.V))%align == 0
}
