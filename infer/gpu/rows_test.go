package gpu_test

import (
	"errors"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

// loadCtx loads cfg on the GPU with a cache of ctx positions and KV types kv.
func loadCtx(t *testing.T, cfg tinymodel.Config, ctx int, kv infer.KVTypes) *infer.Model {
	t.Helper()
	f, err := tinymodel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := infer.Load(f, infer.Options{Backend: "gpu", Batch: 64, Context: ctx, KV: kv, GPU: softwareOK})
	if err != nil {
		if errors.Is(err, gpu.ErrNoAdapter) && os.Getenv("CI") != "true" {
			t.Skipf("no GPU adapter: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestForwardRowsMatchesForward runs three sequences in their own regions
// of the cache through passes over rows that mix them (prompts with steps
// of the others, steps in changing order), then each alone from position 0
// through Forward: every logit after a prompt and after every step must be
// the bits the sequence alone gives. It holds the backend's passes run by
// run, as production runs them on an f16 cache (RunByRun makes sure), each
// the pass of one sequence; several sequences in one pass (OnePasses)
// round otherwise (TestOnePassMatchesAlone).
func TestForwardRowsMatchesForward(t *testing.T) {
	const region = 128
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			rowsMatchForward(t, loadCtx(t, tinymodel.Small(typ), 3*region, infer.KVTypes{}), region)
		})
	}
	// the decode attention paths and the unfused ops bind the cache too
	for _, path := range []string{"split", "unfused"} {
		t.Run(path, func(t *testing.T) {
			m := loadCtx(t, tinymodel.Small(gguf.Q1_0), 3*region, infer.KVTypes{})
			if b := m.Backend().(*gpu.Backend); path == "unfused" {
				gpu.Unfuse(b)
			} else {
				gpu.UseAttnPath(b, path)
			}
			rowsMatchForward(t, m, region)
		})
	}
	// the hybrid qwen35: each sequence on a recurrent state of its own
	t.Run("qwen35", func(t *testing.T) {
		m, err := infer.Load(gpu.OpenQwen35Tiny(t, gguf.Q1_0), infer.Options{Backend: "gpu", Batch: 64, Context: 3 * region, GPU: softwareOK})
		if err != nil {
			if errors.Is(err, gpu.ErrNoAdapter) && os.Getenv("CI") != "true" {
				t.Skipf("no GPU adapter: %v", err)
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		if err := m.UseSequences(3); err != nil {
			t.Fatal(err)
		}
		rowsMatchForward(t, m, region)
	})
}

// rowsMatchForward is TestForwardRowsMatchesForward on m, whose cache holds
// three regions of region positions.
func rowsMatchForward(t *testing.T, m *infer.Model, region int) {
	t.Helper()
	if !m.RowsSupported() {
		t.Fatal("passes over rows unsupported on the GPU")
	}
	gpu.RunByRun(m.Backend().(*gpu.Backend))
	V := m.Hparams.Vocab
	prompts := [][]int32{{1, 5, 9, 13, 17}, {2, 4, 6}, {3, 7, 11, 19, 23, 29, 31}}
	fed := make([][]int32, len(prompts))     // the tokens each sequence has run
	got := make([][][]float32, len(prompts)) // the logits after each run
	// pass runs the rows of sequences seqs: a prompt for one not yet
	// started, else a step of the argmax of its last logits.
	pass := func(seqs ...int) {
		t.Helper()
		var rows []infer.Row
		var outs []int
		for _, s := range seqs {
			if len(fed[s]) == 0 {
				for i, id := range prompts[s] {
					rows = append(rows, infer.Row{Token: id, Pos: i, Base: s * region, Seq: s})
				}
				fed[s] = append(fed[s], prompts[s]...)
			} else {
				id := gpuArgmax(got[s][len(got[s])-1])
				rows = append(rows, infer.Row{Token: id, Pos: len(fed[s]), Base: s * region, Step: true, Seq: s})
				fed[s] = append(fed[s], id)
			}
			outs = append(outs, len(rows)-1)
		}
		logits := make([]float32, len(outs)*V)
		if err := m.ForwardRows(rows, outs, logits); err != nil {
			t.Fatal(err)
		}
		for j, s := range seqs {
			got[s] = append(got[s], logits[j*V:(j+1)*V])
		}
	}
	pass(0, 1)
	pass(1, 2, 0)
	for _, order := range [][]int{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {0, 2, 1}} {
		pass(order...)
	}
	for s, p := range prompts {
		if err := m.Forward(p, 0); err != nil {
			t.Fatal(err)
		}
		want := [][]float32{slices.Clone(m.Logits())}
		for i, id := range fed[s][len(p):] {
			if err := m.Forward([]int32{id}, len(p)+i); err != nil {
				t.Fatal(err)
			}
			want = append(want, slices.Clone(m.Logits()))
		}
		if len(want) != len(got[s]) {
			t.Fatalf("sequence %d: %d passes alone, %d over rows", s, len(want), len(got[s]))
		}
		for i := range want {
			if k := firstDiff(want[i], got[s][i]); k >= 0 {
				t.Errorf("sequence %d after %d tokens: logit %d over rows %v, alone %v", s, len(p)+i, k, got[s][i][k], want[i][k])
			}
		}
	}
}

// TestForwardRowsOutputsMatchCPU asks for the logits of rows that are not
// their run's last (the GPU then runs the run's head on every output row,
// GatherRows) in runs of two sequences: each must agree with the CPU's, as
// decoding does (TestGreedyMatchesCPU's tolerance).
func TestForwardRowsOutputsMatchCPU(t *testing.T) {
	cfg := tinymodel.Small(gguf.Q8_0)
	m := loadCtx(t, cfg, 256, infer.KVTypes{})
	f, err := tinymodel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cpu, err := infer.Load(f, infer.Options{Backend: "cpu", Batch: 64, Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cpu.Close() })
	var rows []infer.Row
	for i, id := range []int32{1, 5, 9, 13} {
		rows = append(rows, infer.Row{Token: id, Pos: i, Base: 128, Seq: 1})
	}
	for i, id := range []int32{2, 4, 6} {
		rows = append(rows, infer.Row{Token: id, Pos: i})
	}
	outs := []int{5, 1, 3, 4}
	V := m.Hparams.Vocab
	got, want := make([]float32, len(outs)*V), make([]float32, len(outs)*V)
	if err := m.ForwardRows(rows, outs, got); err != nil {
		t.Fatal(err)
	}
	if err := cpu.ForwardRows(rows, outs, want); err != nil {
		t.Fatal(err)
	}
	for j, o := range outs {
		var maxAbs, maxDiff float64
		for i := j * V; i < (j+1)*V; i++ {
			maxAbs = math.Max(maxAbs, math.Abs(float64(want[i])))
			maxDiff = math.Max(maxDiff, math.Abs(float64(got[i]-want[i])))
		}
		if maxDiff > 3e-2*maxAbs || maxAbs == 0 {
			t.Errorf("output %d (row %d): logits differ from the CPU's by %.3g (largest %.3g)", j, o, maxDiff, maxAbs)
		}
	}
}

// TestRowsUnsupportedQ8KV: a Q8_0 cache keeps its block scales apart from
// each position's values, so a sequence's region cannot be bound as a
// cache; every pass over rows is then one pass over the whole cache
// (TestOnePassMatchesAlone), which qwen35's recurrent layers cannot take:
// the model says so and ForwardRows runs nothing.
func TestRowsUnsupportedQ8KV(t *testing.T) {
	m, err := infer.Load(gpu.OpenQwen35Tiny(t, gguf.Q1_0), infer.Options{Backend: "gpu", Batch: 64, Context: 256,
		KV: infer.KVTypes{K: infer.KVQ8_0, V: infer.KVQ8_0}, GPU: softwareOK})
	if err != nil {
		if errors.Is(err, gpu.ErrNoAdapter) && os.Getenv("CI") != "true" {
			t.Skipf("no GPU adapter: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if m.RowsSupported() {
		t.Fatal("passes over rows of qwen35 supported on a Q8_0 cache")
	}
	err = m.ForwardRows([]infer.Row{{Token: 1, Base: 128}}, []int{0}, make([]float32, m.Hparams.Vocab))
	if !errors.Is(err, infer.ErrUnsupportedOp) {
		t.Fatalf("ForwardRows on a Q8_0 cache: %v, want ErrUnsupportedOp", err)
	}
	q3 := loadCtx(t, tinymodel.Small(gguf.Q1_0), 256, infer.KVTypes{K: infer.KVQ8_0, V: infer.KVQ8_0})
	if !q3.RowsSupported() {
		t.Fatal("passes over rows of qwen3 unsupported on a Q8_0 cache")
	}
}

// firstDiff is the first index where a and b differ in bits, or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestOnePassMatchesAlone runs four sequences of different prompt lengths
// in their own regions of the cache, then steps all of them in passes over
// one row of each (the GPU's one pass over several sequences): every
// step's logits must be those of the sequence alone (Forward from position
// 0). In F32 nothing is rounded between the ops, so they must agree to
// 1e-4 of the largest logit, which pins every op of the batched pass; with
// activations rounded to a vec-dot type, or K and V to Q8_0, the batch's
// kernels sum in another order than a one-row pass's, which now and then
// moves a value across a rounding boundary (TestGreedyMatchesCPU,
// TestQwen35GreedyMatchesCPU: the same tolerances). A batched step of four
// rows must also cost about the dispatches of one row, not four times
// them.
func TestOnePassMatchesAlone(t *testing.T) {
	const region = 64
	q8 := infer.KVTypes{K: infer.KVQ8_0, V: infer.KVQ8_0}
	for _, c := range []struct {
		name string
		typ  gguf.Type
		kv   infer.KVTypes
		tol  float64
	}{
		{"F32", gguf.F32, infer.KVTypes{}, 1e-4},
		{"Q1_0", gguf.Q1_0, infer.KVTypes{}, 3e-2},
		{"Q4_K", gguf.Q4_K, infer.KVTypes{}, 3e-2},
		{"Q1_0/q8_0-cache", gguf.Q1_0, q8, 3e-2},
	} {
		t.Run(c.name, func(t *testing.T) {
			onePassMatchesAlone(t, loadCtx(t, tinymodel.Small(c.typ), 4*region, c.kv), region, c.tol)
		})
	}
	// the hybrid qwen35: each sequence's rows step its own recurrent
	// state, which carries a rounding's shift into every later token
	for _, typ := range []gguf.Type{gguf.F32, gguf.Q1_0} {
		t.Run("qwen35/"+typ.String(), func(t *testing.T) {
			m, err := infer.Load(gpu.OpenQwen35Tiny(t, typ), infer.Options{Backend: "gpu", Batch: 64, Context: 4 * region, GPU: softwareOK})
			if err != nil {
				if errors.Is(err, gpu.ErrNoAdapter) && os.Getenv("CI") != "true" {
					t.Skipf("no GPU adapter: %v", err)
				}
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			if err := m.UseSequences(4); err != nil {
				t.Fatal(err)
			}
			// a prompt's chunk long enough for the chunked delta rule
			// keeps the passes run by run
			chunk := []infer.Row{{Token: 1, Base: 3 * region, Seq: 3}}
			for i := range gpu.DefaultDeltaChunkMin {
				chunk = append(chunk, infer.Row{Token: 2, Pos: i, Seq: 0})
			}
			gpu.OnePasses(m.Backend().(*gpu.Backend))
			if b := m.Backend().(*gpu.Backend); b.OnePass(chunk) || !b.OnePass(chunk[:3]) {
				t.Errorf("one pass over a step and a %d-row chunk %v, over a step and 2 rows %v", len(chunk)-1, b.OnePass(chunk), b.OnePass(chunk[:3]))
			}
			onePassMatchesAlone(t, m, region, tolFor(typ))
		})
	}
}

func onePassMatchesAlone(t *testing.T, m *infer.Model, region int, tol float64) {
	gpu.OnePasses(m.Backend().(*gpu.Backend))
	t.Helper()
	b := m.Backend().(*gpu.Backend)
	V := m.Hparams.Vocab
	prompts := [][]int32{{1, 5, 9, 13, 17}, {2, 4, 6}, {3, 7, 11, 19, 23, 29, 31, 37, 41}, {8}}
	fed := make([][]int32, len(prompts))
	got := make([][][]float32, len(prompts)) // the logits after the prompt and each step
	last := make([][]float32, len(prompts))
	// the prompts: a pass of each sequence alone (Forward's on its region;
	// on a Q8_0 cache one pass over rows, the one token of sequence 3 too)
	for s, p := range prompts {
		var rows []infer.Row
		for i, id := range p {
			rows = append(rows, infer.Row{Token: id, Pos: i, Base: s * region, Seq: s})
		}
		last[s] = make([]float32, V)
		if err := m.ForwardRows(rows, []int{len(rows) - 1}, last[s]); err != nil {
			t.Fatal(err)
		}
		got[s] = append(got[s], last[s])
		fed[s] = slices.Clone(p)
	}
	var batched int
	var batchedCensus map[string]int
	for step := range 6 {
		var rows []infer.Row
		var outs []int
		for s := range prompts {
			id := gpuArgmax(last[s])
			rows = append(rows, infer.Row{Token: id, Pos: len(fed[s]), Base: s * region, Step: true, Seq: s})
			fed[s] = append(fed[s], id)
			outs = append(outs, s)
		}
		logits := make([]float32, len(outs)*V)
		if err := m.ForwardRows(rows, outs, logits); err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			batched, batchedCensus = b.LastDispatches(), b.LastCensus()
		}
		for s := range prompts {
			last[s] = slices.Clone(logits[s*V : (s+1)*V])
			got[s] = append(got[s], last[s])
		}
	}
	// sequence 1 goes on alone: a pass of its own, on the state (or the
	// cache region) the passes over rows left
	id := gpuArgmax(last[1])
	one := make([]float32, V)
	if err := m.ForwardRows([]infer.Row{{Token: id, Pos: len(fed[1]), Base: region, Step: true, Seq: 1}}, []int{0}, one); err != nil {
		t.Fatal(err)
	}
	fed[1], got[1] = append(fed[1], id), append(got[1], one)
	agree := func(s, i int, got, want []float32) {
		t.Helper()
		var maxAbs, maxDiff float64
		for k := range want {
			maxAbs = math.Max(maxAbs, math.Abs(float64(want[k])))
			maxDiff = math.Max(maxDiff, math.Abs(float64(got[k]-want[k])))
		}
		if maxDiff > tol*maxAbs || maxAbs == 0 {
			t.Errorf("sequence %d after %d tokens: logits differ from the sequence alone by %.3g (largest %.3g)", s, i, maxDiff, maxAbs)
		}
	}
	for s, p := range prompts {
		if err := m.Forward(p, 0); err != nil {
			t.Fatal(err)
		}
		agree(s, len(p), got[s][0], m.Logits())
		for i, id := range fed[s][len(p):] {
			if err := m.Forward([]int32{id}, len(p)+i); err != nil {
				t.Fatal(err)
			}
			if s == 0 && i == 0 {
				// a decoding step alone, its dispatches against the batch's
				oneRow := b.LastDispatches()
				t.Logf("dispatches: a step of one row %d %v", oneRow, b.LastCensus())
				t.Logf("dispatches: a step of %d rows %d %v", len(prompts), batched, batchedCensus)
				if batched > 2*oneRow {
					t.Errorf("a step of %d rows took %d dispatches, one row %d", len(prompts), batched, oneRow)
				}
			}
			agree(s, len(p)+i+1, got[s][i+1], m.Logits())
		}
	}
}
