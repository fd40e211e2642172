package cpu

// job is work split over rows [lo, hi); worker says which scratch space the
// part may use (0 ≤ worker < the pool's threads).
type job interface {
	run(lo, hi, worker int)
}

// chunksPerThread cuts row-parallel work finer than one share per thread:
// shares are claimed dynamically on the matrix products' pool, so on a
// machine shared with other processes a thread that is not scheduled in time
// does less instead of holding everyone up, and uneven rows (causal
// attention) balance themselves.
const chunksPerThread = 8

// rangeTask runs a job over [0, n) as chunks of contiguous rows.
type rangeTask struct {
	j         job
	n, chunks int
}

func (t *rangeTask) RunChunk(c, worker int) {
	t.j.run(c*t.n/t.chunks, (c+1)*t.n/t.chunks, worker)
}

// parallel runs j over [0, n) on the products' pool and returns when all of
// it is done. Chunks are at least grain rows, so small jobs are not split.
func (b *Backend) parallel(n, grain int, j job) {
	if n <= 0 {
		return
	}
	chunks := min(chunksPerThread*b.qpool.Threads(), max(1, n/max(1, grain)))
	if chunks == 1 {
		j.run(0, n, 0)
		return
	}
	b.task = rangeTask{j: j, n: n, chunks: chunks}
	b.qpool.Run(chunks, &b.task)
	b.task = rangeTask{}
}
