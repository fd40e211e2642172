package slots

import (
	"testing"
	"time"
)

// Prefill chunks (Request.Chunk) take about the target at the speed
// measured, within the smallest chunk and the model's largest batch.
func TestNextChunk(t *testing.T) {
	const target = 250 * time.Millisecond
	for _, tc := range []struct {
		n    int
		d    time.Duration
		max  int
		want int
	}{
		{16, 320 * time.Millisecond, 512, 12},        // 50 tok/s: 12 tokens in 250ms
		{16, 2 * time.Millisecond, 512, 512},         // a GPU: the whole batch
		{16, 10 * time.Second, 512, prefillMinChunk}, // very slow: the smallest
		{0, 0, 512, 512},
		{16, time.Second, 4, 4}, // a batch smaller than the smallest chunk
	} {
		if got := nextChunk(tc.n, tc.d, target, tc.max); got != tc.want {
			t.Errorf("nextChunk(%d, %v, %v, %d) = %d, want %d", tc.n, tc.d, target, tc.max, got, tc.want)
		}
	}
}
