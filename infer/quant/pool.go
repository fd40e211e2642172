package quant

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool is a fixed set of worker goroutines that split matrix products by
// rows. The goroutines live as long as the Pool, so a product costs a wake-up
// per worker, not a goroutine; the calling goroutine works too. A Pool runs
// one product at a time: use it from one goroutine (the engine's).
type Pool struct {
	threads int
	wake    []chan struct{}
	done    sync.WaitGroup
	closed  bool

	// The product in flight, set before the workers are woken.
	job  job
	next atomic.Int64 // next unclaimed chunk
}

// NewPool starts a pool of threads workers (the caller counts as one).
// threads ≤ 0 means one per core (runtime.NumCPU: this project's machines
// report physical cores; hyperthreads would only contend for the same SIMD
// units).
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, wake: make([]chan struct{}, threads-1)}
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
		go p.worker(p.wake[i])
	}
	return p
}

// Threads is the number of threads that share each product.
func (p *Pool) Threads() int { return p.threads }

// Close stops the workers. The Pool must not be used afterwards.
func (p *Pool) Close() {
	if p.closed {
		return
	}
	p.closed = true
	for _, w := range p.wake {
		close(w)
	}
}

func (p *Pool) worker(wake <-chan struct{}) {
	for range wake {
		p.work()
		p.done.Done()
	}
}

// run executes p.job on every thread and returns when all chunks are done.
func (p *Pool) run() {
	p.next.Store(0)
	if p.job.chunks > 1 {
		helpers := min(len(p.wake), p.job.chunks-1)
		p.done.Add(helpers)
		for _, w := range p.wake[:helpers] {
			w <- struct{}{}
		}
		p.work()
		p.done.Wait()
	} else {
		p.work()
	}
	p.job = job{} // drop references to the caller's buffers
}

// work claims chunks until none are left. Chunks are claimed dynamically, so
// a thread delayed by another process on a shared machine simply does fewer.
func (p *Pool) work() {
	for {
		c := int(p.next.Add(1) - 1)
		if c >= p.job.chunks {
			return
		}
		p.job.do(c)
	}
}

// job is one matrix product cut into chunks of rows (and, for MatMul, tiles
// of tokens).
type job struct {
	m      *Matrix
	a      *Activations
	y      []float32
	chunks int
	// rowsPerChunk and tokensPerChunk cut the rows × tokens product into
	// rowChunks × tokenChunks tiles.
	rowsPerChunk, tokensPerChunk int
	rowChunks                    int
	tokens                       int
	// quantize instead runs a.quantizeTokens over chunks of tokens of x.
	quantize bool
	x        []float32
}

func (j *job) do(c int) {
	if j.quantize {
		t0 := c * j.tokensPerChunk
		j.a.quantizeTokens(j.x, t0, min(t0+j.tokensPerChunk, j.a.Tokens))
		return
	}
	rc, tc := c%j.rowChunks, c/j.rowChunks
	r0 := rc * j.rowsPerChunk
	r1 := min(r0+j.rowsPerChunk, j.m.Rows)
	t0 := tc * j.tokensPerChunk
	t1 := min(t0+j.tokensPerChunk, j.tokens)
	j.m.kernel(j.m, j.a, r0, r1, t0, t1, j.y)
}
