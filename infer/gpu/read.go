package gpu

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
	"github.com/cogentcore/webgpu/wgpu"
)

// Reading results back: Read and Argmax copy into staging buffers that
// Commit maps once the pass has run.

// copyOut ends the pass, copies size bytes of src into staging and resumes.
func (b *Backend) copyOut(src, staging *wgpu.Buffer, size int) {
	b.endPass()
	if err := b.enc.CopyBufferToBuffer(src, 0, staging, 0, uint64((size+3)&^3)); err != nil {
		b.fail(fmt.Errorf("gpu: copying results: %w", err))
	}
	b.beginPass()
}

func (b *Backend) Read(tT infer.Tensor, dst []float32) {
	if !b.ready() {
		return
	}
	t := b.tensorArg("Read", tT)
	if t == nil {
		return
	}
	n := b.active(t)
	if len(dst) < n*t.cols {
		b.shapeErr("Read: %d floats for %d×%d", len(dst), n, t.cols)
		return
	}
	if t.passReads == 0 {
		b.touched = append(b.touched, t)
	}
	if t.passReads == len(t.stagings) {
		buf, err := b.d.newBuffer(t.name+".read", t.buf.GetSize(), readUsage)
		if err != nil {
			b.fail(err)
			return
		}
		t.stagings = append(t.stagings, buf)
	}
	staging := t.stagings[t.passReads]
	t.passReads++
	b.copyOut(t.buf, staging, n*t.cols*4)
	b.reads = append(b.reads, pendingRead{staging: staging, bytes: n * t.cols * 4, floats: dst[:n*t.cols]})
}

func (b *Backend) Argmax(tT infer.Tensor, dst []int32) {
	if !b.ready() {
		return
	}
	t := b.tensorArg("Argmax", tT)
	if t == nil {
		return
	}
	n := b.active(t)
	if len(dst) < n {
		b.shapeErr("Argmax: %d slots for %d rows", len(dst), n)
		return
	}
	if t.argmax == nil {
		a, err := b.d.newBuffer(t.name+".argmax", uint64(4*t.rows), storageUsage)
		if err != nil {
			b.fail(err)
			return
		}
		s, err := b.d.newBuffer(t.name+".argmax.read", uint64(4*t.rows), readUsage)
		if err != nil {
			a.Release()
			b.fail(err)
			return
		}
		t.argmax, t.argStaging = a, s
	}
	o := b.prepared(opKey{kind: "argmax", a: t}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("argmax", map[string]shaders.Const{"COLS": shaders.U32(t.cols), "XROWS": shaders.U32(t.rows)})
		return k, []binding{whole(b.batchBuf), whole(t.buf), whole(t.argmax)}, err
	})
	b.dispatch(o, n, 1, 1)
	if b.chainArgmax(t, dst) {
		return
	}
	b.copyOut(t.argmax, t.argStaging, 4*n)
	b.reads = append(b.reads, pendingRead{staging: t.argStaging, bytes: 4 * n, ints: dst[:n]})
}
