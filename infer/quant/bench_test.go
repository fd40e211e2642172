//go:build unix

package quant

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"golang.org/x/sys/unix"
)

// Benchmarks on Bonsai-1.7B-like shapes (2048 columns). Besides wall time
// they report the calling thread's CPU time per product, which stays
// meaningful on a machine shared with other work:
//
//	go test ./infer/quant/ -run X -bench Kernel -benchtime 2s
//
// GMAC/s-cpu is multiply-accumulates per CPU-second of one thread, GB/s-cpu
// weight bytes per CPU-second (decode is bandwidth-bound once two threads
// together exceed the memory's ~18.5 GB/s).
func BenchmarkKernel(b *testing.B) {
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q2_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
		for _, shape := range []struct{ rows, tokens int }{{256, 1}, {6144, 1}, {151936, 1}, {6144, 8}, {6144, 64}} {
			b.Run(fmt.Sprintf("%s/%dx2048/tokens=%d", typ, shape.rows, shape.tokens), func(b *testing.B) {
				benchProduct(b, typ, shape.rows, 2048, shape.tokens)
			})
		}
	}
}

func benchProduct(b *testing.B, typ gguf.Type, rows, cols, tokens int) {
	benchProductWith(b, typ, rows, cols, tokens, nil)
}

// benchProductWith is benchProduct with the matrix's kernel chosen by
// prepare (nil: the one NewMatrix picked).
func benchProductWith(b *testing.B, typ gguf.Type, rows, cols, tokens int, prepare func(*Matrix)) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := rand.New(rand.NewPCG(1, 1))
	m := randMatrixFast(b, r, typ, rows, cols)
	if prepare != nil {
		prepare(m)
	}
	x := randVec(r, cols*tokens)
	p := NewPool(1) // one thread: the figures are per core
	defer p.Close()
	var a Activations
	if err := p.Quantize(&a, typ, x, cols, tokens); err != nil {
		b.Fatal(err)
	}
	y := make([]float32, rows*tokens)
	b.SetBytes(int64(len(m.Data)))
	cpu0 := threadCPU()
	for b.Loop() {
		if err := p.MatMul(m, &a, y); err != nil {
			b.Fatal(err)
		}
	}
	cpu := (threadCPU() - cpu0).Seconds()
	b.ReportMetric(float64(rows)*float64(cols)*float64(tokens)*float64(b.N)/cpu/1e9, "GMAC/s-cpu")
	b.ReportMetric(float64(len(m.Data))*float64(b.N)/cpu/1e9, "GB/s-cpu")
}

// threadCPU is the calling thread's CPU time (nanosecond resolution).
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// randMatrixFast fills a matrix with random bytes and small sane scales
// (the reference quantizers are too slow for 150k-row benchmarks).
func randMatrixFast(tb testing.TB, r *rand.Rand, typ gguf.Type, rows, cols int) *Matrix {
	rb, _ := typ.RowBytes(int64(cols))
	data := make([]byte, rows*int(rb))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	bb := typ.BlockBytes()
	for off := 0; off < len(data); off += bb {
		switch typ {
		case gguf.Q6_K, gguf.PTQ1_0: // d last
			copy(data[off+bb-2:], []byte{0x00, 0x2c})
		default: // d (and dmin) first: 1/16
			copy(data[off:], []byte{0x00, 0x2c, 0x00, 0x2c})
		}
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkKernelFeatures is BenchmarkKernel's decode and prompt shapes
// under each feature level (SetFeatures): what a CPU without AVX-512, and
// one without any of bonsai's assembly, gets per core.
//
//	go test ./infer/quant/ -run X -bench KernelFeatures -benchtime 1s
func BenchmarkKernelFeatures(b *testing.B) {
	defer SetFeatures(FeaturesAll)
	for _, f := range []Features{FeaturesAll, FeaturesAVX2, FeaturesPortable} {
		for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q4_0, gguf.Q8_0, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.F16, gguf.BF16} {
			for _, tokens := range []int{1, 8} {
				b.Run(fmt.Sprintf("%v/%s/6144x2048/tokens=%d", f, typ, tokens), func(b *testing.B) {
					if err := SetFeatures(f); err != nil {
						b.Skip(err)
					}
					benchProduct(b, typ, 6144, 2048, tokens)
				})
			}
		}
	}
}

// BenchmarkDecodeMemory is one token through matrices far larger than the
// last-level cache, on two threads as `bonsai bench --threads 2` runs them:
// wall-clock weight bytes per second, to set beside `bench --membw`'s read
// bandwidth (the bound of a decode step). 128256×2048 is Llama-3.2-1B's
// tied output head.
//
//	go test ./infer/quant/ -run X -bench DecodeMemory -benchtime 20x
func BenchmarkDecodeMemory(b *testing.B) {
	// F32 has next to no arithmetic per byte: its figure is the stream's.
	for _, typ := range []gguf.Type{gguf.F32, gguf.Q4_K, gguf.Q6_K} {
		for _, shape := range []struct{ rows, cols int }{{128256, 2048}, {2048, 8192}} {
			b.Run(fmt.Sprintf("%s/%dx%d", typ, shape.rows, shape.cols), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 1))
				// Enough copies of a small matrix that together they
				// leave the cache: each step reads the next one.
				rb, _ := typ.RowBytes(int64(shape.cols))
				copies := max(1, (256<<20)/(shape.rows*int(rb)))
				ms := make([]*Matrix, copies)
				for i := range ms {
					ms[i] = randMatrixFast(b, r, typ, shape.rows, shape.cols)
				}
				x := randVec(r, shape.cols)
				p := NewPool(2)
				defer p.Close()
				var a Activations
				if err := p.Quantize(&a, typ, x, shape.cols, 1); err != nil {
					b.Fatal(err)
				}
				y := make([]float32, shape.rows)
				b.SetBytes(int64(len(ms[0].Data)))
				// The fastest step too: on a shared machine the mean
				// counts the other work's time slices.
				i, best := 0, time.Duration(1<<62)
				cpu0 := processCPU()
				for b.Loop() {
					start := time.Now()
					if err := p.MatMul(ms[i%copies], &a, y); err != nil {
						b.Fatal(err)
					}
					best = min(best, time.Since(start))
					i++
				}
				b.ReportMetric(float64(len(ms[0].Data))/best.Seconds()/1e9, "GB/s-best")
				reportPoolCPU(b, cpu0, 2, len(ms[0].Data))
			})
		}
	}
}

// BenchmarkDecodeLayers is one token through 16 layers shaped and typed
// as Llama-3.2-1B Q4_K_M's (Q, K, V in one MatMuls call, O, gate and up
// in one, down; V and down Q6_K in every other layer), two threads: the
// products' synchronisation and the start of each thread's share, which
// a matrix of 128256 rows hides, weigh here as they do in decode.
//
//	go test ./infer/quant/ -run X -bench DecodeLayers -benchtime 20x
func BenchmarkDecodeLayers(b *testing.B) {
	const hidden, kv, ffn, layers = 2048, 512, 8192, 16
	r := rand.New(rand.NewPCG(1, 1))
	type layer struct{ q, k, v, o, gate, up, down *Matrix }
	ls := make([]layer, layers)
	bytes := 0
	for i := range ls {
		vt := gguf.Q4_K
		if i%2 == 0 {
			vt = gguf.Q6_K
		}
		l := &ls[i]
		l.q = randMatrixFast(b, r, gguf.Q4_K, hidden, hidden)
		l.k = randMatrixFast(b, r, gguf.Q4_K, kv, hidden)
		l.v = randMatrixFast(b, r, vt, kv, hidden)
		l.o = randMatrixFast(b, r, gguf.Q4_K, hidden, hidden)
		l.gate = randMatrixFast(b, r, gguf.Q4_K, ffn, hidden)
		l.up = randMatrixFast(b, r, gguf.Q4_K, ffn, hidden)
		l.down = randMatrixFast(b, r, vt, hidden, ffn)
		for _, m := range []*Matrix{l.q, l.k, l.v, l.o, l.gate, l.up, l.down} {
			bytes += len(m.Data)
		}
	}
	p := NewPool(2)
	defer p.Close()
	// One Q8_K quantization serves the Q4_K and Q6_K products alike.
	var ah, af Activations
	if err := p.Quantize(&ah, gguf.Q4_K, randVec(r, hidden), hidden, 1); err != nil {
		b.Fatal(err)
	}
	if err := p.Quantize(&af, gguf.Q6_K, randVec(r, ffn), ffn, 1); err != nil {
		b.Fatal(err)
	}
	yq, yk, yv, yo := make([]float32, hidden), make([]float32, kv), make([]float32, kv), make([]float32, hidden)
	yg, yu, yd := make([]float32, ffn), make([]float32, ffn), make([]float32, hidden)
	b.SetBytes(int64(bytes))
	best := time.Duration(1 << 62)
	cpu0 := processCPU()
	for b.Loop() {
		start := time.Now()
		for _, l := range ls {
			if err := p.MatMuls([]Product{{l.q, yq}, {l.k, yk}, {l.v, yv}}, &ah); err != nil {
				b.Fatal(err)
			}
			if err := p.MatMul(l.o, &ah, yo); err != nil {
				b.Fatal(err)
			}
			if err := p.MatMuls([]Product{{l.gate, yg}, {l.up, yu}}, &ah); err != nil {
				b.Fatal(err)
			}
			if err := p.MatMul(l.down, &af, yd); err != nil {
				b.Fatal(err)
			}
		}
		best = min(best, time.Since(start))
	}
	b.ReportMetric(float64(bytes)/best.Seconds()/1e9, "GB/s-best")
	reportPoolCPU(b, cpu0, 2, bytes)
}

// processCPU is the process's CPU time, all threads together.
func processCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportPoolCPU reports GB/s-cpu for a benchmark whose steps each read
// bytes on a pool of threads: the bytes per second of the process's CPU
// time shared by the threads, spinning included — what the wall clock
// would show were the threads never descheduled.
func reportPoolCPU(b *testing.B, cpu0 time.Duration, threads, bytes int) {
	cpu := (processCPU() - cpu0).Seconds() / float64(threads)
	b.ReportMetric(float64(bytes)*float64(b.N)/cpu/1e9, "GB/s-cpu")
}
