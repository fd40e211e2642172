package quant

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Matrix is a weight matrix as GGUF stores it: Rows rows of Cols elements
// (ne0 = Cols, ne1 = Rows), each row Type-encoded, rows back to back. Data
// is typically the file's mapping and is never copied or written.
type Matrix struct {
	Type       gguf.Type
	Rows, Cols int
	Data       []byte

	rowBytes int
	traits   *traits
	// packed is the weights re-laid for the SIMD kernel (nil if the kernel
	// reads Data directly).
	packed []byte
	// kernel computes y[t·Rows + r] for rows [r0, r1) and tokens [t0, t1):
	// the fastest implementation this CPU has for Type.
	kernel product
}

// product computes y[t·Rows + r] = row r of m · token t of a for rows
// [r0, r1) and tokens [t0, t1).
type product = func(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32)

// cpuKernel is a product in assembly for one instruction-set level and
// the weight layout it reads: repack re-lays a Matrix's rows for it, or is
// nil where it reads the file's rows. Each architecture's isaTable
// (isa_amd64.go, isa_arm64.go) holds a type's kernels per level and
// chooses among them.
type cpuKernel struct {
	product product
	repack  func(m *Matrix) []byte
}

// chooseKernel is the best kernel this CPU has for weights of type t under
// SetFeatures, or the zero cpuKernel for the portable dot product.
func chooseKernel(t gguf.Type) cpuKernel {
	if k, ok := isaTable[t]; ok {
		return k.choose()
	}
	return cpuKernel{}
}

// NewMatrix wraps data as a rows × cols matrix of type t.
func NewMatrix(t gguf.Type, rows, cols int, data []byte) (*Matrix, error) {
	tr, err := lookup(t)
	if err != nil {
		return nil, err
	}
	if tr.dot == nil {
		return nil, fmt.Errorf("%w: %s is an activation type, not a weight type", ErrUnsupportedType, t)
	}
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("%w: %d × %d matrix", ErrLength, rows, cols)
	}
	rb, err := rowBytes(t, cols)
	if err != nil {
		return nil, err
	}
	if len(data)/rb < rows || len(data) != rows*rb {
		return nil, fmt.Errorf("%w: %d × %d %s needs %d bytes, got %d", ErrLength, rows, cols, t, rows*rb, len(data))
	}
	m := &Matrix{Type: t, Rows: rows, Cols: cols, Data: data, rowBytes: rb, traits: tr, kernel: portableKernel}
	if k := chooseKernel(t); k.product != nil {
		m.kernel = k.product
		if k.repack != nil {
			m.packed = k.repack(m)
		}
	}
	return m, nil
}

// Row is the bytes of row r.
func (m *Matrix) Row(r int) []byte { return m.Data[r*m.rowBytes : (r+1)*m.rowBytes] }

// portableKernel is the pure-Go product: one dot product per row and
// token.
func portableKernel(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	dot, gemm := m.dotFor(a.orderTokens()), m.gemmTokens(a.orderTokens())
	for t := t0; t < t1; t++ {
		d := dot
		if t < gemm {
			d = m.traits.repackedGemm
		}
		x := a.Token(t)
		yt := y[t*m.Rows:]
		for r := r0; r < r1; r++ {
			yt[r] = d(m.Cols, m.Row(r), x)
		}
	}
}

// gemmTokens is how many leading tokens of a product over tokens tokens
// llama.cpp computes with its repacked gemm kernel rather than its gemv.
// ggml repacks a matrix of such a type at load when its row count is a
// multiple of 8, and its product quantizes the activations and runs the
// gemm on them in whole groups of 4 rows, the gemv on the tokens%4 rows
// left over: a product over one token (a decode step, the output head)
// is all gemv, a prompt of 10 tokens is 8 rows of gemm and 2 of gemv. So
// the order in which a token's dot products round depends on how many
// tokens share its product, which is why the backend must call a product
// with the same rows llama.cpp's graph gives it.
func (m *Matrix) gemmTokens(tokens int) int {
	if m.traits.repackedGemm == nil || m.Rows%8 != 0 {
		return 0
	}
	return tokens - tokens%4
}

// dotFor is the dot product of a product of the given number of tokens:
// the type's, or for two or more tokens its batchDot if it applies
// (llama.cpp's f16 and bf16 products change order with the batch).
func (m *Matrix) dotFor(tokens int) func(n int, w, x []byte) float32 {
	if g := m.traits.batchDot; g != nil && tokens > 1 && m.Cols%g.block == 0 {
		return g.dot
	}
	return m.traits.dot
}

// Activations is a batch of Tokens vectors of N activations quantized to
// Type (a vec-dot type), laid out as llama.cpp lays them out, token after
// token. Buffers grow to the largest batch seen and are then reused, so
// quantizing allocates nothing in steady state.
type Activations struct {
	Type      gguf.Type
	N, Tokens int
	Data      []byte
	// Steps makes a product round every token as a product of that one
	// token would (the infer.Batch.Steps of a verify pass), whatever the
	// number of tokens: no gemm order for the repacked types, no batched
	// order for f16 and bf16. Quantize leaves it as it was.
	Steps bool

	rowBytes int
	quantize func(x []float32, dst []byte)
	// planes is extra per-token data the SIMD kernels read (see simd.go);
	// nil when they are not in use for Type.
	planes *planes
}

// orderTokens is the token count that decides a product's order of
// rounding: 1 for Steps.
func (a *Activations) orderTokens() int {
	if a.Steps {
		return 1
	}
	return a.Tokens
}

// Token is the quantized bytes of token t.
func (a *Activations) Token(t int) []byte { return a.Data[t*a.rowBytes : (t+1)*a.rowBytes] }

// prepare sizes a for tokens × n activations for weights of type wt.
func (a *Activations) prepare(wt gguf.Type, n, tokens int) error {
	f, err := lookup(wt)
	if err != nil {
		return err
	}
	act := f.vecDot
	rb, err := rowBytes(act, n)
	if err != nil {
		return err
	}
	a.Type, a.N, a.Tokens, a.rowBytes = act, n, tokens, rb
	a.quantize = activationQuantizers[act]
	if need := rb * tokens; cap(a.Data) < need {
		a.Data = make([]byte, need)
	} else {
		a.Data = a.Data[:need]
	}
	a.preparePlanes(wt)
	return nil
}

// quantizeTokens quantizes tokens [t0, t1) of x (row-major, N per token).
func (a *Activations) quantizeTokens(x []float32, t0, t1 int) {
	for t := t0; t < t1; t++ {
		a.quantize(x[t*a.N:(t+1)*a.N], a.Token(t))
		a.fillPlanes(t, 0, a.N)
	}
}

// quantizeCols quantizes columns [c0, c1) of token t of x, for Q8_0 or
// Q8_1 (multiples of their 32-column blocks, which are quantized
// independently).
func (a *Activations) quantizeCols(x []float32, t, c0, c1 int) {
	bb := a.Type.BlockBytes()
	a.quantize(x[t*a.N+c0:t*a.N+c1], a.Token(t)[c0/qk8_0*bb:c1/qk8_0*bb])
	a.fillPlanes(t, c0, c1)
}

// QuantizedFor reports whether a holds activations quantized for products
// with weights of type wt (Quantize's wt, or one that reads the same).
func (a *Activations) QuantizedFor(wt gguf.Type) bool {
	return a.Type == VecDotType(wt) && a.planesFor(wt)
}

// quantizeSplit is the fewest columns of one token a share of Quantize
// holds when a decoding step's few tokens are split by columns.
const quantizeSplit = 512

// Quantize quantizes tokens rows of x (row-major, n per token) for a
// product with weights of type wt, on the pool's threads: by tokens, or
// for a decoding step's few by columns (while one thread quantizes, the
// others would wait).
func (p *Pool) Quantize(a *Activations, wt gguf.Type, x []float32, n, tokens int) error {
	if tokens <= 0 || len(x) != n*tokens {
		return fmt.Errorf("%w: %d activations for %d tokens of %d", ErrLength, len(x), tokens, n)
	}
	if err := a.prepare(wt, n, tokens); err != nil {
		return err
	}
	if tokens < 4 {
		parts := min(2*p.threads, n/quantizeSplit)
		if a.Type != gguf.Q8_0 && a.Type != gguf.Q8_1 || parts < 2 {
			a.quantizeTokens(x, 0, tokens)
			return nil
		}
		per := (n/qk8_0 + parts - 1) / parts * qk8_0
		colChunks := (n + per - 1) / per
		p.job = job{a: a, x: x, quantize: true, colsPerChunk: per, colChunks: colChunks, chunks: colChunks * tokens}
		p.run()
		return nil
	}
	per := (tokens + 4*p.threads - 1) / (4 * p.threads)
	p.job = job{a: a, x: x, quantize: true, tokensPerChunk: per, chunks: (tokens + per - 1) / per}
	p.run()
	return nil
}

// MatVec computes y = m·x for one token: y[r] = row r · x. a holds x
// quantized by Quantize for m's type (one token); len(y) = m.Rows.
func (p *Pool) MatVec(m *Matrix, a *Activations, y []float32) error {
	if err := check(m, a, y, 1); err != nil {
		return err
	}
	p.matmul(m, a, 1, y)
	return nil
}

// MatMul computes Y = X·mᵀ for a.Tokens tokens: y[t·m.Rows + r] = row r ·
// token t. The weights are streamed once per tile of tokens, not once per
// token. len(y) = a.Tokens·m.Rows.
func (p *Pool) MatMul(m *Matrix, a *Activations, y []float32) error {
	if err := check(m, a, y, a.Tokens); err != nil {
		return err
	}
	p.matmul(m, a, a.Tokens, y)
	return nil
}

// Product is one matrix product of a MatMuls call: Y = X·Mᵀ.
type Product struct {
	M *Matrix
	Y []float32
}

// maxShared is how many products one MatMuls dispatch carries (Q, K and V).
const maxShared = 4

// MatMuls computes every product of ps against the same activations a (all
// a.Tokens tokens), as MatMul would one by one, but wakes the workers once
// for up to maxShared of them: the products of a layer that read the same
// input (Q, K, V; gate, up) then cost one synchronisation instead of three.
func (p *Pool) MatMuls(ps []Product, a *Activations) error {
	for _, pr := range ps {
		if err := check(pr.M, a, pr.Y, a.Tokens); err != nil {
			return err
		}
	}
	for len(ps) > 0 {
		group := ps[:min(len(ps), maxShared)]
		ps = ps[len(group):]
		if len(group) == 1 {
			p.matmul(group[0].M, a, a.Tokens, group[0].Y)
			continue
		}
		total := 0
		for i, pr := range group {
			p.shared[i] = p.tiling(pr.M, a, a.Tokens, pr.Y)
			p.starts[i] = total
			total += p.shared[i].chunks
		}
		p.starts[len(group)] = total
		p.job = job{shared: p.shared[:len(group)], starts: p.starts[:len(group)+1], chunks: total}
		p.run()
	}
	return nil
}

func check(m *Matrix, a *Activations, y []float32, tokens int) error {
	switch {
	case a.Type != m.traits.vecDot:
		return fmt.Errorf("%w: activations are %s, %s weights need %s", ErrUnsupportedType, a.Type, m.Type, m.traits.vecDot)
	case !a.planesFor(m.Type):
		return fmt.Errorf("%w: activations quantized for Q1_0 weights, not %s", ErrUnsupportedType, m.Type)
	case a.N != m.Cols:
		return fmt.Errorf("%w: %d activations for %d columns", ErrLength, a.N, m.Cols)
	case tokens > a.Tokens || tokens <= 0:
		return fmt.Errorf("%w: %d tokens, %d quantized", ErrLength, tokens, a.Tokens)
	case len(y) != tokens*m.Rows:
		return fmt.Errorf("%w: output has %d floats, want %d tokens × %d rows", ErrLength, len(y), tokens, m.Rows)
	}
	return nil
}

// Tiling: a chunk is rowsPerChunk rows × tokenTile tokens. Rows come in
// multiples of 16 so SIMD kernels can work on row groups; the token tile
// keeps a tile's activations in L2 while its rows stream through.
const (
	rowAlign  = 16
	tokenTile = 64
)

func (p *Pool) matmul(m *Matrix, a *Activations, tokens int, y []float32) {
	p.job = p.tiling(m, a, tokens, y)
	p.run()
}

// minChunkWork is the least work worth a chunk, in weight bytes × tokens:
// a few µs on one core, against the ~0.1–0.3 µs that claiming and
// completing a chunk costs when many cores contend for the pool's counters.
const minChunkWork = 32 << 10

// tiling cuts the product y = m·a (tokens tokens) into chunks.
func (p *Pool) tiling(m *Matrix, a *Activations, tokens int, y []float32) job {
	tt := min(tokens, tokenTile)
	tokenChunks := (tokens + tt - 1) / tt
	// Up to 8 chunks per thread, for balance on a shared machine, where a
	// thread that is not scheduled in time simply claims fewer; but never
	// chunks below minChunkWork, which on many cores (a 2048-row matrix on
	// 16 threads would be 16 rows a chunk) would cost more in claims than
	// they balance. A whole number of chunks per thread keeps the last
	// round even.
	perThread := min(8, max(1, m.Rows*m.rowBytes*tt/(p.threads*minChunkWork)))
	rowChunksWanted := max(1, perThread*p.threads/tokenChunks)
	per := (m.Rows + rowChunksWanted - 1) / rowChunksWanted
	per = (per + rowAlign - 1) / rowAlign * rowAlign
	rowChunks := (m.Rows + per - 1) / per
	return job{m: m, a: a, y: y, rowsPerChunk: per, rowChunks: rowChunks, tokensPerChunk: tt, tokens: tokens, chunks: rowChunks * tokenChunks}
}
