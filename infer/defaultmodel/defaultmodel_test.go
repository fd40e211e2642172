package defaultmodel

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	_ "github.com/bonsai-chat/bonsai/infer/cpu"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

func TestFile(t *testing.T) {
	if len(GGUF) > 16_000_000 {
		t.Errorf("embedded model is %d bytes, over the 16 MB budget", len(GGUF))
	}
	f, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := f.KV.String("general.name"); name != Name {
		t.Errorf("general.name = %q", name)
	}
	if arch, _ := f.KV.String("general.architecture"); arch != "qwen3" {
		t.Errorf("architecture = %q", arch)
	}
	for _, ti := range f.Tensors {
		want := gguf.F32
		if len(ti.Shape) == 2 {
			want = gguf.Q1_0
		}
		if ti.Type != want {
			t.Errorf("%s %v is %s, want %s", ti.Name, ti.Shape, ti.Type, want)
		}
	}
	if _, ok := f.Tensor("output.weight"); ok {
		t.Errorf("output.weight present: the embeddings should be tied")
	}
	src, _ := f.KV.String("tokenizer.chat_template")
	if tpl := chat.FromSource(src); tpl.Kind != chat.KindQwen3 || !tpl.Recognized {
		t.Errorf("chat template not recognised as Qwen3: %+v", tpl)
	}
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		t.Fatal(err)
	}
	if tok.EOS() != 151645 || tok.Vocab() != 151936 || tok.AddBOS() {
		t.Errorf("tokenizer: eos %d vocab %d add_bos %v", tok.EOS(), tok.Vocab(), tok.AddBOS())
	}
}

// reference is what train.py recorded with the same weights in PyTorch fp32.
type reference struct {
	HeldoutNLL float64   `json:"heldout_nll"`
	WindowNLL  []float64 `json:"window_nll"`
	Greedy     []struct {
		Prompt  []int32   `json:"prompt_ids"`
		IDs     []int32   `json:"greedy_ids"`
		Margins []float64 `json:"margins"`
	} `json:"greedy"`
}

// TestGreedyMatchesTraining runs the engine's CPU backend on the prompts
// train.py decoded and requires the same tokens for as long as PyTorch's
// choice was clear (a top-2 logit gap above what rounding can flip: the
// engine quantizes activations to 8 bits as llama.cpp does, PyTorch ran fp32).
func TestGreedyMatchesTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the model on the CPU")
	}
	data, err := os.ReadFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	f, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	const clearGap = 0.05 // logits; Q8_0 activations move logits by about 1e-3 here
	compared := 0
	for pi, g := range ref.Greedy {
		if err := m.Forward(g.Prompt, 0); err != nil {
			t.Fatal(err)
		}
		pos := len(g.Prompt)
		for step, want := range g.IDs {
			if g.Margins[step] < clearGap {
				break // a near tie: the paths may part here without either being wrong
			}
			got := argmax(m.Logits())
			if got != want {
				t.Fatalf("prompt %d step %d: engine picked %d, PyTorch %d (PyTorch top-2 gap %.3f)", pi, step, got, want, g.Margins[step])
			}
			if err := m.Forward([]int32{want}, pos); err != nil {
				t.Fatal(err)
			}
			pos++
			compared++
		}
	}
	if compared < 60 {
		t.Fatalf("only %d steps compared: the reference has too few clear choices to test anything", compared)
	}
	t.Logf("%d greedy steps agree with PyTorch", compared)
}

func argmax(xs []float32) int32 {
	best := 0
	for i, x := range xs {
		if x > xs[best] {
			best = i
		}
	}
	return int32(best)
}

// TestNLLMatchesTraining scores the first positions of the first held-out
// window and compares with PyTorch's per-token losses summed the same way.
// It needs the held-out tokens, which are not in the repository (they are
// rebuilt by tools/train-default/corpus); BONSAI_VAL_TOKENS names the file.
func TestNLLMatchesTraining(t *testing.T) {
	path := os.Getenv("BONSAI_VAL_TOKENS")
	if path == "" || testing.Short() {
		t.Skip("set BONSAI_VAL_TOKENS to .carry/train-default/val.bin (see tools/train-default/README.md)")
	}
	data, err := os.ReadFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ctx = 1024
	if len(raw) < 4*ctx {
		t.Fatalf("%s holds fewer than %d tokens", path, ctx)
	}
	ids := make([]int32, ctx)
	for i := range ids {
		ids[i] = int32(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
	}
	f, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var sum float64
	for i := 0; i+1 < ctx; i++ {
		if err := m.Forward(ids[i:i+1], i); err != nil {
			t.Fatal(err)
		}
		sum += nll(m.Logits(), ids[i+1])
	}
	got, want := sum/float64(ctx-1), ref.WindowNLL[0]
	if math.Abs(got-want) > 1e-3*want {
		t.Errorf("window 0 mean NLL %.6f, PyTorch %.6f", got, want)
	}
	t.Logf("window 0 mean NLL %.6f, PyTorch %.6f", got, want)
}

func nll(logits []float32, target int32) float64 {
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	var s float64
	for _, l := range logits {
		s += math.Exp(float64(l) - mx)
	}
	return mx + math.Log(s) - float64(logits[target])
}
