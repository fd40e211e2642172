package gpu

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// wgpuWaitTimeout is how long wgpu-core 0.19's blocking poll waits on the
// fence before it treats the submission as finished anyway.
const wgpuWaitTimeout = 5 * time.Second

// TestPassOutlastsWaitTimeout runs one pass that keeps the device busy for
// longer than wgpu's blocking poll waits (calibrated to ~1.5× of it), then
// checks that the results read back are the finished ones. Waiting through
// wgpuDevicePoll(wait) made wgpu reset the pass's command pool and map the
// staging buffer while lavapipe was still executing it: a segfault inside
// Mesa, or zeros read back. Adapters too fast to reach the timeout within
// maxReps dispatches still check the results.
func TestPassOutlastsWaitTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("a pass of several seconds")
	}
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(5, 6))
	const m, k, n, maxReps = 256, 256, 64, 20000
	wv := randFloats(r, m*k, 1)
	wb := quantizeMatrix(t, gguf.F32, m, k, wv)
	w, err := b.LoadWeight(infer.WeightData{Name: "w", Type: gguf.F32, Shape: []int64{k, m}, Data: wb})
	if err != nil {
		t.Fatal(err)
	}
	x := b.mustTensor(t, "x", n, k)
	y := b.mustTensor(t, "y", n, m)
	xv := randFloats(r, n*k, 1)
	b.write(t, x, xv)
	want := refMatMul(gguf.F32, wb, m, k, xv, n)

	pass := func(reps int) (time.Duration, []float32) {
		got := make([]float32, n*m)
		start := time.Now()
		b.Begin(batchOf(n, 0))
		for range reps {
			b.MatMul(y, w, x)
		}
		b.Read(y, got)
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start), got
	}
	const probe = 16
	took, _ := pass(probe)
	reps := min(maxReps, max(probe, int(float64(probe)*1.5*float64(wgpuWaitTimeout)/float64(took))))
	took, got := pass(reps)
	t.Logf("%d matmuls in one pass: %v (%s)", reps, took, b.d.Name())
	if e := maxRelErr(got, want); e > 1e-5 {
		t.Fatalf("after a %v pass: max error %.3g of the largest value; got[0:4] %v want %v", took, e, got[:4], want[:4])
	}
	if took < wgpuWaitTimeout {
		t.Logf("the pass ended before wgpu's %v wait timeout: results checked, the timeout not exercised", wgpuWaitTimeout)
	}
}
