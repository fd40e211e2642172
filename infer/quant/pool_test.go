package quant

import (
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestTilingChunks: a product is cut into a whole number of chunks per
// thread, up to 8, and no finer than minChunkWork (weight bytes × tokens)
// a chunk, so that many threads on a small matrix get one or two chunks
// each rather than slivers of 16 rows.
func TestTilingChunks(t *testing.T) {
	for _, tc := range []struct {
		typ              gguf.Type
		rows, cols       int
		threads, tokens  int
		chunks, rowsEach int
	}{
		// 2048 × 2048 Q8_0 (4.5 MB): 8 chunks per thread at any count here.
		{gguf.Q8_0, 2048, 2048, 2, 1, 16, 128},
		{gguf.Q8_0, 2048, 2048, 16, 1, 128, 16},
		// 1024 × 2048 Q4_0 (1.2 MB) on 16 threads: 2 chunks per thread.
		{gguf.Q4_0, 1024, 2048, 16, 1, 32, 32},
		// The same on 2 threads: 8 per thread.
		{gguf.Q4_0, 1024, 2048, 2, 1, 16, 64},
		// A tiny matrix: one chunk per thread at least, 16 rows each.
		{gguf.Q4_0, 64, 256, 16, 1, 4, 16},
		// Prompt tiles: 64 tokens make every chunk heavy; two token tiles
		// share the 8 per thread.
		{gguf.Q4_0, 1024, 2048, 2, 128, 16, 128},
	} {
		rb, err := rowBytes(tc.typ, tc.cols)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMatrix(tc.typ, tc.rows, tc.cols, make([]byte, tc.rows*rb))
		if err != nil {
			t.Fatal(err)
		}
		p := &Pool{threads: tc.threads}
		j := p.tiling(m, &Activations{}, tc.tokens, nil)
		if j.chunks != tc.chunks || j.rowsPerChunk != tc.rowsEach {
			t.Errorf("%s %d×%d, %d threads, %d tokens: %d chunks of %d rows, want %d of %d",
				tc.typ, tc.rows, tc.cols, tc.threads, tc.tokens, j.chunks, j.rowsPerChunk, tc.chunks, tc.rowsEach)
		}
	}
}
