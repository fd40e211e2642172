package quant

import (
	"runtime"
	"sync/atomic"
)

// Pool is a fixed set of worker goroutines that split matrix products by
// rows. The goroutines live as long as the Pool, so a product costs a wake-up
// per worker, not a goroutine; the calling goroutine works too. A Pool runs
// one product at a time: use it from one goroutine (the engine's).
//
// Chunks are claimed dynamically and the caller waits for unfinished chunks,
// never for idle workers: on a machine shared with other processes a worker
// that is not scheduled in time simply does less, instead of stalling every
// product until it wakes (what a barrier would do).
type Pool struct {
	threads int
	wake    []chan struct{}
	done    chan struct{} // one signal per product, from whoever ends its last chunk
	closed  bool

	// The product in flight. job is written before state publishes it and
	// is stable while any of its chunks is unfinished.
	job       job
	shared    [maxShared]job // MatMuls' products, pointed to by job.shared
	starts    [maxShared + 1]int
	gen       uint64
	state     atomic.Uint64 // gen<<40 | chunks<<20 | next chunk
	remaining atomic.Int64  // chunks not yet finished
}

const (
	chunkBits = 20
	chunkMask = 1<<chunkBits - 1
)

// NewPool starts a pool of threads workers (the caller counts as one).
// threads ≤ 0 means one per core (runtime.NumCPU: this project's machines
// report physical cores; hyperthreads would only contend for the same SIMD
// units).
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, wake: make([]chan struct{}, threads-1), done: make(chan struct{}, 1)}
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
		go p.worker(i+1, p.wake[i])
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

func (p *Pool) worker(id int, wake <-chan struct{}) {
	for range wake {
		p.work(id)
	}
}

// Task is work cut into chunks for Run. worker (0 ≤ worker < Threads) says
// which per-thread scratch space the chunk may use.
type Task interface {
	RunChunk(chunk, worker int)
}

// Run runs chunks [0, chunks) of t on the pool's threads, claimed
// dynamically like a product's, and returns when all are done.
func (p *Pool) Run(chunks int, t Task) {
	if chunks <= 0 {
		return
	}
	p.job = job{task: t, chunks: chunks}
	p.run()
}

// run executes p.job (its chunks set) on every thread that turns up and
// returns when all chunks are done.
func (p *Pool) run() {
	chunks := p.job.chunks
	if chunks <= 0 {
		return
	}
	if chunks > chunkMask {
		panic("quant: too many chunks") // unreachable: matmul makes at most ~8 per thread per token tile
	}
	p.gen++
	p.remaining.Store(int64(chunks))
	p.state.Store(p.gen<<(2*chunkBits) | uint64(chunks)<<chunkBits)
	for _, w := range p.wake[:min(len(p.wake), chunks-1)] {
		select {
		case w <- struct{}{}:
		default: // already has a wake-up pending
		}
	}
	p.work(0)
	<-p.done
	p.job = job{} // drop references to the caller's buffers
	clear(p.shared[:])
}

// work claims chunks of the current product until none are left.
func (p *Pool) work(worker int) {
	for {
		s := p.state.Load()
		next, chunks := s&chunkMask, s>>chunkBits&chunkMask
		if next >= chunks {
			return
		}
		if !p.state.CompareAndSwap(s, s+1) {
			continue
		}
		// The claim succeeded for the live product: its fields stay put
		// until this chunk is counted done.
		p.job.do(int(next), worker)
		if p.remaining.Add(-1) == 0 {
			p.done <- struct{}{}
		}
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
	// shared, when set, holds the products of one MatMuls call: chunk c
	// belongs to shared[i] where starts[i] ≤ c < starts[i+1].
	shared []job
	starts []int
	// task, when set, is Run's: chunk c is task.RunChunk(c, worker).
	task Task
}

func (j *job) do(c, worker int) {
	if j.task != nil {
		j.task.RunChunk(c, worker)
		return
	}
	if j.shared != nil {
		i := 0
		for c >= j.starts[i+1] {
			i++
		}
		j.shared[i].do(c-j.starts[i], worker)
		return
	}
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
