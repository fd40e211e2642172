package cpu

import "sync"

// job is work split over rows [lo, hi); worker says which scratch space the
// part may use (0 ≤ worker < pool.size).
type job interface {
	run(lo, hi, worker int)
}

type part struct {
	j              job
	lo, hi, worker int
}

// pool is a fixed set of worker goroutines. parallel hands each a
// contiguous share of the rows and runs one share itself; nothing is
// allocated per call, so a forward pass stays allocation-free.
type pool struct {
	size  int
	parts chan part
	wg    sync.WaitGroup
	stop  sync.Once
}

func newPool(size int) *pool {
	p := &pool{size: max(1, size), parts: make(chan part)}
	for range p.size - 1 {
		go func() {
			for pt := range p.parts {
				pt.j.run(pt.lo, pt.hi, pt.worker)
				p.wg.Done()
			}
		}()
	}
	return p
}

// parallel runs j over [0, n) and returns when all of it is done. Shares are
// at least grain rows, so small jobs are not split.
func (p *pool) parallel(n, grain int, j job) {
	if n <= 0 {
		return
	}
	shares := min(p.size, max(1, n/max(1, grain)))
	if shares == 1 {
		j.run(0, n, 0)
		return
	}
	p.wg.Add(shares - 1)
	for s := 1; s < shares; s++ {
		p.parts <- part{j, s * n / shares, (s + 1) * n / shares, s}
	}
	j.run(0, n/shares, 0)
	p.wg.Wait()
}

func (p *pool) close() { p.stop.Do(func() { close(p.parts) }) }
