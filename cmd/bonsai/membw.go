package main

import (
	"runtime"
	"sync"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// membwBytes is the buffer `bench --membw` reads: far above any last-level
// cache (a few hundred MiB on the largest server parts), so every pass
// comes from DRAM.
const membwBytes = 2 << 30

// readBandwidth measures how fast threads threads read memory, in bytes
// per second: each reads its share of a size-byte buffer (faulted in
// first), passes times, and the fastest pass counts (the machine's limit,
// not its load). The loop is a plain sum with eight independent
// accumulators, so the loads, not the adds, bound it.
func readBandwidth(threads int, size int64, passes int) float64 {
	buf := make([]uint64, size/8)
	threads = max(1, threads)
	share := len(buf) / threads / 8 * 8
	var wg sync.WaitGroup
	// Fault the pages in from the threads that will read them (on a NUMA
	// machine, first touch places them).
	parallelShares(&wg, threads, func(i int) {
		s := buf[i*share : (i+1)*share]
		for j := range s {
			s[j] = uint64(j)
		}
	})
	best := 0.0
	var sink uint64
	var mu sync.Mutex
	for range passes {
		start := time.Now()
		parallelShares(&wg, threads, func(i int) {
			s := sumWords(buf[i*share : (i+1)*share])
			mu.Lock()
			sink += s
			mu.Unlock()
		})
		best = max(best, float64(threads*share*8)/time.Since(start).Seconds())
	}
	runtime.KeepAlive(sink)
	return best
}

// parallelShares runs f(0) … f(threads-1) each on its own OS thread and
// waits for all of them.
func parallelShares(wg *sync.WaitGroup, threads int, f func(i int)) {
	for i := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			f(i)
		}()
	}
	wg.Wait()
}

// sumWords adds the words of s (len a multiple of 8).
func sumWords(s []uint64) uint64 {
	var a0, a1, a2, a3, a4, a5, a6, a7 uint64
	for i := 0; i+8 <= len(s); i += 8 {
		c := s[i : i+8 : i+8]
		a0 += c[0]
		a1 += c[1]
		a2 += c[2]
		a3 += c[3]
		a4 += c[4]
		a5 += c[5]
		a6 += c[6]
		a7 += c[7]
	}
	return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
}

// decodeBytes is what decoding one token at position pos (pos tokens
// already in the cache) reads from memory: every weight tensor once, except
// the token embedding, of which one row is read unless it doubles as the
// output head (no output.weight); the K and V of positions 0…pos in the
// layers that keep them; and the recurrent state of a hybrid network.
// Activations and scratch stay in cache and are not counted.
func decodeBytes(f *gguf.File, h infer.Hyperparams, kvt infer.KVTypes, pos int) int64 {
	var n int64
	tied := true
	for i := range f.Tensors {
		if f.Tensors[i].Name == "output.weight" {
			tied = false
		}
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Name == "token_embd.weight" && !tied && len(t.Shape) == 2 && t.Shape[1] > 0 {
			n += t.Size / t.Shape[1]
			continue
		}
		n += t.Size
	}
	kv, rs := infer.StateSpecs(f, h, pos+1)
	kv.KVTypes = kvt
	return n + kv.Bytes() + rs.Bytes()
}

// tgBytes is the mean of decodeBytes over a tg test of n tokens decoded
// after depth tokens in the cache (positions depth…depth+n-1).
func tgBytes(f *gguf.File, h infer.Hyperparams, kvt infer.KVTypes, depth, n int) float64 {
	if n <= 0 {
		return 0
	}
	var sum float64
	for pos := depth; pos < depth+n; pos++ {
		sum += float64(decodeBytes(f, h, kvt, pos))
	}
	return sum / float64(n)
}
