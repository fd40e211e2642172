package gpu

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
	"github.com/cogentcore/webgpu/wgpu"
)

// MaxTopK is the largest k TopK takes (sample.MaxTopCandidates).
const MaxTopK = 64

// topKSort is the entries one workgroup of topk.wgsl sorts: 8 KiB of
// workgroup memory, half WebGPU's default limit.
const topKSort = 1024

// topK is a prepared top-k of one tensor's last row: its passes'
// workgroups, the candidate lists between passes and the result.
type topK struct {
	k      int
	groups []int
	ops    []*op
	lists  [2]*wgpu.Buffer
	out    *wgpu.Buffer
	stage  *wgpu.Buffer
	row    *wgpu.Buffer // MapRead: the row, for a chained pick's NaN fallback
}

// topKPlan is the workgroups of each pass over cols logits: the first
// sorts topKSort logits per workgroup, each next one topKSort/k lists of
// k, until one list is left.
func topKPlan(cols, k int) []int {
	g := []int{ceilDiv(cols, topKSort)}
	for per := topKSort / k; g[len(g)-1] > 1; {
		g = append(g, ceilDiv(g[len(g)-1], per))
	}
	return g
}

// prepareTopK builds t's top-k of k candidates once.
func (b *Backend) prepareTopK(t *tensor, k int) (*topK, error) {
	key := opKey{kind: "topk", a: t, i: k}
	if tk, ok := b.topKs[key]; ok {
		return tk, nil
	}
	tk := &topK{k: k, groups: topKPlan(t.cols, k)}
	size := uint64(8 * k * tk.groups[0])
	var err error
	for i := range tk.lists {
		if tk.lists[i], err = b.d.newBuffer(t.name+".topk", size, storageUsage); err != nil {
			return nil, err
		}
	}
	if tk.out, err = b.d.newBuffer(t.name+".topk.out", uint64(8*k), storageUsage); err != nil {
		return nil, err
	}
	if tk.stage, err = b.d.newBuffer(t.name+".topk.read", uint64(8*k), readUsage); err != nil {
		return nil, err
	}
	count := t.cols
	for p, g := range tk.groups {
		final := p == len(tk.groups)-1
		per := topKSort
		if p > 0 {
			per = topKSort / k * k
		}
		defs := map[string]shaders.Const{"COLS": shaders.U32(t.cols), "XROWS": shaders.U32(t.rows), "K": shaders.U32(k),
			"COUNT": shaders.U32(count), "PER": shaders.U32(per), "N": shaders.U32(topKSort),
			"SRC_LOGITS": shaders.Flag(p == 0), "FINAL": shaders.Flag(final)}
		kn, err := b.d.kernel("topk", defs)
		if err != nil {
			return nil, err
		}
		dst := tk.out
		if !final {
			dst = tk.lists[p%2]
		}
		// a middle pass does not read the row
		bufs := []binding{whole(b.batchBuf)}
		if p == 0 || final {
			bufs = append(bufs, at(1, whole(t.buf)))
		}
		if p > 0 {
			bufs = append(bufs, at(2, whole(tk.lists[(p-1)%2])))
		}
		bufs = append(bufs, at(3, whole(dst)))
		bg, err := b.d.bindGroup(kn, bufs...)
		if err != nil {
			return nil, err
		}
		o := &op{k: kn, bg: bg}
		for _, bb := range bufs {
			o.bufs = append(o.bufs, bb.buf)
		}
		tk.ops = append(tk.ops, o)
		count = g * k
	}
	if b.topKs == nil {
		b.topKs = map[opKey]*topK{}
	}
	b.topKs[key] = tk
	return tk, nil
}

// TopK writes the k best of t's last active row, in the sampler's order
// (logit descending, lower id first on ties, −0 equal to +0), into dst at
// Commit as 2k words: each candidate's id, then its logit's bits. A row
// holding a NaN gives a NaN first (its order is then not defined: sample
// the whole row).
func (b *Backend) TopK(tT infer.Tensor, k int, dst []int32) {
	if !b.ready() {
		return
	}
	t := b.tensorArg("TopK", tT)
	if t == nil {
		return
	}
	if k < 1 || k > MaxTopK || k >= t.cols || len(dst) < 2*k {
		b.shapeErr("TopK: k %d (at most %d, below %d columns) into %d words", k, MaxTopK, t.cols, len(dst))
		return
	}
	tk, err := b.prepareTopK(t, k)
	if err != nil {
		b.fail(fmt.Errorf("gpu: top-k: %w", err))
		return
	}
	b.encodeTopK(tk)
	b.copyOut(tk.out, tk.stage, 8*k)
	b.reads = append(b.reads, pendingRead{staging: tk.stage, bytes: 8 * k, ints: dst[:2*k]})
}

func (b *Backend) encodeTopK(tk *topK) {
	for i, o := range tk.ops {
		b.dispatch(o, tk.groups[i], 1, 1)
	}
}

func (b *Backend) releaseTopKs() {
	for _, tk := range b.topKs {
		for _, o := range tk.ops {
			o.bg.Release()
		}
		for _, buf := range []*wgpu.Buffer{tk.lists[0], tk.lists[1], tk.out, tk.stage, tk.row} {
			if buf != nil {
				buf.Release()
			}
		}
	}
	b.topKs = nil
}
