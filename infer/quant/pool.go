package quant

import (
	"sync/atomic"
	"time"
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
//
// Between products the workers spin for a while before they sleep, and so
// does the caller waiting for the last chunk: a decoded token is ~150
// products a few hundred µs apart, and a futex wake-up (tens of µs before
// the woken thread runs) on each would leave a core idle a sixth of the
// time. A sleeping worker is woken through its channel.
type Pool struct {
	threads  int
	wake     []chan struct{}
	sleeping []atomic.Bool // worker i+1 is (about to be) blocked on wake[i]
	done     chan struct{} // the last chunk's signal to a caller that sleeps
	waiting  atomic.Bool   // the caller is (about to be) blocked on done
	closed   atomic.Bool

	// The product in flight. job is written before state publishes it and
	// is stable while any of its chunks is unfinished.
	job    job
	shared [maxShared]job // MatMuls' products, pointed to by job.shared
	starts [maxShared + 1]int
	gen    uint64
	// state and remaining are the two words every thread writes once per
	// chunk; each has a cache line of its own so that claims and
	// completions on many cores do not bounce one line between them (and
	// the fields above, read by all, stay shared and clean).
	_         [64]byte
	state     atomic.Uint64 // gen<<40 | chunks<<20 | next chunk
	_         [56]byte
	remaining atomic.Int64 // chunks not yet finished
	_         [56]byte
}

const (
	chunkBits = 20
	chunkMask = 1<<chunkBits - 1
)

// NewPool starts a pool of threads workers (the caller counts as one).
// threads ≤ 0 means one per physical core (PhysicalCores).
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = PhysicalCores()
	}
	p := &Pool{threads: threads, wake: make([]chan struct{}, threads-1), sleeping: make([]atomic.Bool, threads-1), done: make(chan struct{}, 1)}
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
	if p.closed.Swap(true) {
		return
	}
	for _, w := range p.wake {
		close(w)
	}
}

// spinFor is how long an idle thread polls for the next product (or the
// last chunk) before it blocks: longer than the serial work between two
// products of a token, short enough that an idle chat costs nothing.
const spinFor = 200 * time.Microsecond

// spin polls until ready returns true or spinFor has passed.
func spin(ready func() bool) bool {
	var start time.Time
	for i := 0; ; i++ {
		if ready() {
			return true
		}
		if i%64 == 63 { // time.Now is ~20 ns: check it now and then
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > spinFor {
				return false
			}
		}
	}
}

func (p *Pool) worker(id int, wake <-chan struct{}) {
	sleeping := &p.sleeping[id-1]
	seen := uint64(0) // the generation this worker last worked on
	fresh := func() bool { return p.state.Load()>>(2*chunkBits) != seen }
	for {
		if !spin(fresh) {
			// Announce the sleep before the last look: run() publishes
			// the product before it reads the flag, so one of the two
			// sees the other (a stale wake-up is harmless).
			sleeping.Store(true)
			if !fresh() {
				if _, ok := <-wake; !ok {
					return
				}
			}
			sleeping.Store(false)
		}
		if p.closed.Load() {
			return
		}
		seen = p.state.Load() >> (2 * chunkBits)
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
	for i, w := range p.wake[:min(len(p.wake), chunks-1)] {
		if !p.sleeping[i].Load() {
			continue // spinning: it sees the new generation itself
		}
		select {
		case w <- struct{}{}:
		default: // already has a wake-up pending
		}
	}
	p.work(0)
	finished := func() bool { return p.remaining.Load() == 0 }
	if !spin(finished) {
		p.waiting.Store(true)
		if finished() && p.waiting.CompareAndSwap(true, false) {
			// Done meanwhile, and no signal is coming.
		} else {
			<-p.done
		}
	}
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
		if p.remaining.Add(-1) == 0 && p.waiting.CompareAndSwap(true, false) {
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
	// quantize instead runs a.quantizeTokens over chunks of tokens of x,
	// or with colsPerChunk a.quantizeCols over colChunks column ranges of
	// each token.
	quantize                bool
	x                       []float32
	colsPerChunk, colChunks int
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
	if j.quantize && j.colsPerChunk > 0 {
		t, c0 := c/j.colChunks, c%j.colChunks*j.colsPerChunk
		j.a.quantizeCols(j.x, t, c0, min(c0+j.colsPerChunk, j.a.N))
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
