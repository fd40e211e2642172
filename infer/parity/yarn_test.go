package parity

import (
	"math"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// yarnCase is a synthetic model whose RoPE is YaRN-scaled, as real Bonsai
// files are (rope.scaling.type = yarn, factor 4, original context 16384):
// llama.cpp's answers for it check bonsai's frequency ramp and attention
// factor against the reference instead of against their own formulas.
type yarnCase struct {
	modelCase
	yarn synth.YaRN
	// linear, if set, scales linearly instead (rope.scaling.type =
	// linear), on a shape without Llama 3's frequency factors.
	linear float64
}

var yarnCases = []yarnCase{
	// Bonsai's own scaling, on a context the tiny shape can hold.
	{modelCase: modelCase{name: "q1_0-yarn", typ: gguf.Q1_0, vocab: 4096,
		prompts: []string{"Bonsai reads long documents with YaRN.", promptCode, promptDates}},
		yarn: synth.YaRN{Factor: 4, OrigContext: 4096}},
	// A short original context and a large factor put more of the head's
	// dimensions inside the ramp, and a larger attention factor.
	{modelCase: modelCase{name: "q8_0-yarn", typ: gguf.Q8_0, vocab: 4096,
		prompts: []string{promptProse, promptCode, promptDates}},
		yarn: synth.YaRN{Factor: 16, OrigContext: 256}},
	// llama: RoPE on adjacent pairs, scaled linearly as Llama 2's
	// long-context fine-tunes are (freq_scale 1/4). F16, whose llama
	// cases match to the bit: in Q8_0 the most decisive of four seeds
	// still had a step within 0.6·ε of a tie, which Q8_0's prompt order
	// (see tolFactor) flipped.
	{modelCase: modelCase{name: "llama-f16-linear", arch: "llama", typ: gguf.F16, vocab: 4096,
		prompts: []string{promptDates, promptCode}}, linear: 4},
}

// options are the case's synth options: its model case's, YaRN-scaled, under
// a shape name of their own so that the generated files never share a
// cache entry with the unscaled cases.
func (c yarnCase) options(t *testing.T, seed uint64) synth.Options {
	t.Helper()
	o := c.modelCase.options(t, seed)
	if c.linear != 0 {
		o.Shape.Name += "-linear"
		o.Shape.Llama3 = nil
		o.Linear = c.linear
		return o
	}
	o.Shape.Name += "-yarn"
	y := c.yarn
	o.YaRN = &y
	return o
}

func TestYaRNParity(t *testing.T) {
	for _, c := range yarnCases {
		t.Run(c.name, func(t *testing.T) {
			g := yarnGolden(t, c)
			path, sum := modelFile(t, c.options(t, g.Seed))
			checkGoldenFits(t, c.name, g, sum, c.prompts)
			checkLiveOracle(t, path, g)
			compareModel(t, path, c.typ, g)
		})
	}
}

// yarnGolden is caseGolden for a YaRN case: read, or under -update asked of
// the oracle for a few seeds, keeping the most decisive model.
func yarnGolden(t *testing.T, c yarnCase) golden {
	t.Helper()
	if !*update {
		g, err := readGolden(c.name)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	requireOracle(t)
	var best golden
	bestScore := math.Inf(-1)
	for seed := uint64(1); seed <= seedTries; seed++ {
		o := c.options(t, seed)
		path, sum := modelFile(t, o)
		g := golden{Arch: c.arch, Shape: o.Shape.Name, Type: o.Type.String(), Vocab: o.Shape.Vocab, Layers: o.Shape.Layers,
			Tied: o.Shape.Tied, Seed: seed, ModelSHA256: sum}
		for _, p := range c.prompts {
			run, err := oracleGenerate(path, p, steps, topLogs)
			if err != nil {
				t.Fatal(err)
			}
			g.Runs = append(g.Runs, promptRun{Prompt: p, oracleRun: run})
		}
		if score := minMarginRuns(c.typ, g.Runs); score > bestScore {
			best, bestScore = g, score
		}
	}
	if err := writeGolden(c.name, best); err != nil {
		t.Fatal(err)
	}
	return best
}
