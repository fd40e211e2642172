package gpu

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/cogentcore/webgpu/wgpu"
)

// maxQueries bounds the timestamps of one pass (≈4 phases per layer).
const maxQueries = 1024

// profiler times phases with encoder timestamps written between compute
// passes: each Phase call ends the pass and writes a timestamp, so the
// interval between two timestamps belongs to the phase that began it.
// A timed pass is encoded whole before it is submitted (so that no phase
// includes the GPU waiting for the host) and pays a barrier and a
// timestamp per phase: on the H200 that made a timed 8B decoding step
// twice as long as an untimed one. So only one decoding pass in
// decodeSampling is timed (every prompt pass is), and the others run as
// they do with profiling off; with profiling off nothing is written.
// What a boundary itself adds to the GPU's time (measured once when
// profiling turns on: boundaryCost) is taken off each phase it begins, so
// that the phases sum to about what the untimed pass spends.
type profiler struct {
	on         bool
	qs         *wgpu.QuerySet
	resolve    *wgpu.Buffer
	staging    *wgpu.Buffer
	count      int
	phases     []profile.Phase
	sample     profile.Sample
	disabled   bool          // no timestamp queries on this adapter
	passes     int           // decoding passes since profiling was turned on
	timed      bool          // this pass is timed
	boundary   time.Duration // GPU time a phase boundary adds (boundaryCost)
	calibrated bool
}

// decodeSampling is one over the share of decoding passes timed: at 8 a
// profiled 8B decode ran 19 % slower than an unprofiled one on the H200;
// at 32 the timed steps cost a quarter of that.
const decodeSampling = 32

func (b *Backend) SetProfiling(on bool) {
	p := &b.prof
	p.on, p.passes, p.timed = on, 0, false
	p.sample = profile.Sample{Source: fmt.Sprintf("gpu timestamps (1 decoding step in %d)", decodeSampling)}
	if !b.d.Timestamps {
		p.sample.Source = "gpu (adapter has no timestamp queries)"
		p.disabled = true
	}
	if on && !p.disabled && p.qs == nil {
		qs, err := b.d.dev.CreateQuerySet(&wgpu.QuerySetDescriptor{Label: "phases", Type: wgpu.QueryTypeTimestamp, Count: maxQueries})
		if err != nil {
			p.disabled = true
			p.sample.Source = fmt.Sprintf("gpu (timestamp query set failed: %v)", err)
			return
		}
		p.qs = qs
		if p.resolve, err = b.d.newBuffer("timestamps", 8*maxQueries, wgpu.BufferUsageQueryResolve|wgpu.BufferUsageCopySrc); err == nil {
			p.staging, err = b.d.newBuffer("timestamps.read", 8*maxQueries, readUsage)
		}
		if err != nil {
			p.disabled = true
			p.sample.Source = fmt.Sprintf("gpu (timestamp buffers failed: %v)", err)
		}
	}
	// calibrating runs passes of its own: not inside one, nor while a
	// chained pass is in flight (the next toggle after it does)
	if on && !p.disabled && !p.calibrated && b.enc == nil && !b.chain.on && b.chain.pending == nil {
		p.boundary, p.calibrated = b.boundaryCost(), true
		p.passes, p.timed = 0, false
	}
	if p.calibrated && !p.disabled {
		p.sample.Source = fmt.Sprintf("gpu timestamps (1 decoding step in %d, less %.1f µs per phase boundary)", decodeSampling, float64(p.boundary.Nanoseconds())/1e3)
	}
}

// boundaryCost measures what one phase boundary adds to a chain of
// dependent dispatches: chain tiny dependent adds timed with a
// boundary before each but the first, against the same chain in one
// phase; the difference over the boundaries, or 0 when the timing fails.
func (b *Backend) boundaryCost() time.Duration {
	const chain = 33
	xT, err := b.NewTensor("boundary.x", 1, 256)
	if err != nil {
		return 0
	}
	yT, err := b.NewTensor("boundary.y", 1, 256)
	if err != nil {
		return 0
	}
	run := func(bounded bool) (time.Duration, bool) {
		b.prof.sample = profile.Sample{}
		b.prof.passes = 0 // times this pass
		b.Begin(infer.Batch{Tokens: []int32{0}})
		for i := 0; i < chain; i++ {
			if bounded && i > 0 {
				b.Phase(profile.Phase(i % 2))
			}
			b.Add(yT, yT, xT)
		}
		if err := b.Commit(); err != nil {
			return 0, false
		}
		return b.prof.sample.Total(), true
	}
	var best [2]time.Duration
	for rep := 0; rep < 3; rep++ {
		for i, bounded := range []bool{false, true} {
			d, ok := run(bounded)
			if !ok {
				return 0
			}
			if rep == 0 || d < best[i] {
				best[i] = d
			}
		}
	}
	b.prof.sample = profile.Sample{}
	return max(0, (best[1]-best[0])/(chain-1))
}

func (b *Backend) TakeProfile() profile.Sample {
	s := b.prof.sample
	b.prof.sample = profile.Sample{Source: s.Source}
	return s
}

// active reports whether the pass being encoded is timed.
func (p *profiler) active() bool { return p.timed }

func (p *profiler) mark(b *Backend, ph profile.Phase) {
	if p.count >= maxQueries-1 {
		return // the rest of the pass counts towards the last phase
	}
	if err := b.enc.WriteTimestamp(p.qs, uint32(p.count)); err != nil {
		b.fail(fmt.Errorf("gpu: timestamp: %w", err))
		return
	}
	p.count++
	p.phases = append(p.phases, ph)
}

func (p *profiler) begin(b *Backend) {
	p.count = 0
	p.phases = p.phases[:0]
	p.timed = false
	if p.on && !p.disabled {
		p.timed = b.n > 1 || p.passes%decodeSampling == 0
		if b.n == 1 {
			p.passes++
		}
	}
	if p.active() {
		p.mark(b, b.phase)
	}
}

func (p *profiler) phase(b *Backend, ph profile.Phase) {
	if !p.active() || ph == b.phase {
		return
	}
	b.endPass()
	p.mark(b, ph)
	b.beginPass()
}

// end writes the closing timestamp and the resolve; the pass is ended.
func (p *profiler) end(b *Backend) {
	if !p.active() || p.count == 0 {
		return
	}
	if p.count < maxQueries {
		if err := b.enc.WriteTimestamp(p.qs, uint32(p.count)); err != nil {
			b.fail(fmt.Errorf("gpu: timestamp: %w", err))
			return
		}
		p.count++
	}
	if err := b.enc.ResolveQuerySet(p.qs, 0, uint32(p.count), p.resolve, 0); err != nil {
		b.fail(fmt.Errorf("gpu: resolving timestamps: %w", err))
		return
	}
	if err := b.enc.CopyBufferToBuffer(p.resolve, 0, p.staging, 0, uint64(8*p.count)); err != nil {
		b.fail(fmt.Errorf("gpu: copying timestamps: %w", err))
	}
}

// collect reads the ticks (1 ns on Vulkan, lavapipe and llvmpipe) after
// the pass has finished.
func (p *profiler) collect(b *Backend, wall time.Duration) error {
	if !p.on || !p.timed && !p.disabled {
		return nil
	}
	p.sample.Tokens += b.n
	if p.disabled || p.count < 2 {
		return nil
	}
	raw := make([]byte, 8*p.count)
	if err := readBuffer(b.d.dev, p.staging, 0, raw); err != nil {
		return err
	}
	prev := binary.LittleEndian.Uint64(raw)
	for i := 1; i < p.count; i++ {
		t := binary.LittleEndian.Uint64(raw[8*i:])
		if t >= prev {
			d := time.Duration(t - prev)
			if i > 1 { // every phase but the pass's first begins at a boundary
				d = max(0, d-p.boundary)
			}
			p.sample.Add(p.phases[i-1], d)
		}
		prev = t
	}
	return nil
}

func (p *profiler) release() {
	if p.qs != nil {
		p.qs.Release()
	}
	for _, b := range []*wgpu.Buffer{p.resolve, p.staging} {
		if b != nil {
			b.Release()
		}
	}
}
