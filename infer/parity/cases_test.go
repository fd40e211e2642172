package parity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/quant"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

var update = flag.Bool("update", false, "ask the llama.cpp oracle anew and rewrite the golden files in testdata/")

// cpuFeatures caps bonsai's CPU kernels, so that parity is checked for the
// AVX2 and portable paths too (test.sh runs it with avx2).
var cpuFeatures = flag.String("cpu-features", "all", "bonsai's CPU kernels: all, avx2 (AVX-512 off) or portable")

// Generation parameters shared by every case.
const (
	steps   = 24 // greedy tokens compared per case
	topLogs = 32 // logits kept per step in the goldens
	// seedTries bounds the search for a decisive seed when updating.
	seedTries = 4
)

// modelCase is one synthetic model and the raw prompts it continues. Every
// type that llama.cpp can run has a case (Q2_0G128, the legacy layout, has
// none: llama.cpp refuses it). Most use a 4096-token cut of the Qwen vocab
// to stay small; one uses the real 151,936-token vocab, and one has a
// separate output matrix (as the 8B has) instead of tied embeddings.
type modelCase struct {
	name    string
	arch    string // synth architecture; "" is qwen3
	typ     gguf.Type
	vocab   int // 0: the real Qwen vocab
	untied  bool
	prompts []string
}

// Prompts shared by the cases after their own first one: code, digits and
// plain prose, so that every case starts from three unrelated contexts.
var (
	promptCode  = "func main() {\n\tfmt.Println(\"hi\")\n}"
	promptDates = "In 1969, 3 astronauts flew 384400 km."
	promptProse = "Dear diary, today I learned"
)

var modelCases = []modelCase{
	{name: "q1_0-qwen-vocab", typ: gguf.Q1_0, prompts: []string{"The quick brown fox jumps over the lazy dog.", promptCode}},
	{name: "q1_0", typ: gguf.Q1_0, vocab: 4096, prompts: []string{"Once upon a time, in a land far away,", promptCode, promptDates}},
	{name: "q1_0-untied", typ: gguf.Q1_0, vocab: 4096, untied: true, prompts: []string{"Bonsai runs 1-bit models locally.", promptCode, promptDates}},
	{name: "q2_0", typ: gguf.Q2_0, vocab: 4096, prompts: []string{promptCode, promptDates, promptProse}},
	{name: "q4_0", typ: gguf.Q4_0, vocab: 4096, prompts: []string{promptDates, promptCode, promptProse}},
	// The legacy types llama.cpp's K-quant mixes fall back to on rows that
	// are not whole super-blocks (Q5_0, Q8_0 for Gemma 3's and Qwen2.5's
	// widths) and older files use throughout; Q4_1 and Q5_1 meet Q8_1
	// activations.
	{name: "q4_1", typ: gguf.Q4_1, vocab: 4096, prompts: []string{"Once upon a time, in a land far away,", promptCode, promptProse}},
	{name: "q5_0", typ: gguf.Q5_0, vocab: 4096, prompts: []string{"To be, or not to be: that is", promptCode, promptDates}},
	{name: "q5_1", typ: gguf.Q5_1, vocab: 4096, prompts: []string{"Hello, world! Hello, bonsai!", promptCode, promptProse}},
	{name: "q8_0", typ: gguf.Q8_0, vocab: 4096, prompts: []string{promptProse, promptCode, promptDates}},
	{name: "q4_k", typ: gguf.Q4_K, vocab: 4096, prompts: []string{"SELECT name FROM users WHERE id = 42;", promptCode, promptProse}},
	{name: "q5_k", typ: gguf.Q5_K, vocab: 4096, prompts: []string{"The mitochondria is the powerhouse", promptCode, promptDates}},
	{name: "q6_k", typ: gguf.Q6_K, vocab: 4096, prompts: []string{"Roses are red, violets are blue", promptCode, promptDates}},
	{name: "f16", typ: gguf.F16, vocab: 4096, prompts: []string{"To be, or not to be: that is", promptCode, promptDates}},
	{name: "bf16", typ: gguf.BF16, vocab: 4096, prompts: []string{"Hello, world! Hello, bonsai!", promptCode, promptDates}},
	{name: "f32", typ: gguf.F32, vocab: 4096, prompts: []string{"1, 1, 2, 3, 5, 8, 13,", promptCode, promptProse}},

	// qwen35: six layers, four Gated DeltaNet (2 K heads, 4 V heads) and
	// two gated full-attention layers with partial RoPE (synth's tiny).
	// Q2_0 and Q1_0, whose dot products sum in llama.cpp's order, match to
	// the bit (so does every qwen35 op); the other types differ by their dot
	// products' order as in the qwen3 cases, and the deeper hybrid network
	// amplifies that more: Q8_0 reached 6.9·ε. Q4_K sums as ggml's repacked
	// q4_K_8x8 kernels, which llama.cpp uses for every Q4_K matrix here:
	// the gemm (one FMA per pair of sub-blocks) on a prompt's tokens in
	// whole groups of 4, the gemv (one per super-block) on the rest and on
	// every decode step; with the decode step's attention in
	// ggml_vec_dot_f16's order and glibc's expf and logf it matches to the
	// bit (before the gemm's order was followed, logits differed from the
	// first step by up to 9.2·ε).
	{name: "qwen35-q2_0-qwen-vocab", arch: "qwen35", typ: gguf.Q2_0, prompts: []string{"The quick brown fox jumps over the lazy dog.", promptCode}},
	{name: "qwen35-q2_0", arch: "qwen35", typ: gguf.Q2_0, vocab: 4096, prompts: []string{promptCode, promptProse}},
	{name: "qwen35-q1_0", arch: "qwen35", typ: gguf.Q1_0, vocab: 4096, prompts: []string{"Once upon a time, in a land far away,", promptDates}},
	{name: "qwen35-q4_k", arch: "qwen35", typ: gguf.Q4_K, vocab: 4096, prompts: []string{"SELECT name FROM users WHERE id = 42;", promptProse}},
	{name: "qwen35-q8_0", arch: "qwen35", typ: gguf.Q8_0, vocab: 4096, prompts: []string{promptProse, promptDates}},
	{name: "qwen35-bf16", arch: "qwen35", typ: gguf.BF16, vocab: 4096, prompts: []string{"Hello, world! Hello, bonsai!", promptDates}},
	{name: "qwen35-f32", arch: "qwen35", typ: gguf.F32, vocab: 4096, prompts: []string{"1, 1, 2, 3, 5, 8, 13,", promptProse}},

	// llama: synth's tiny (Llama 3's structure: GQA, RoPE on adjacent
	// pairs with Llama 3.2's rope_freqs), Llama 3's tokenizer cut to 4096.
	{name: "llama-f16", arch: "llama", typ: gguf.F16, vocab: 4096, prompts: []string{"To be, or not to be: that is", promptCode}},
	{name: "llama-q8_0", arch: "llama", typ: gguf.Q8_0, vocab: 4096, prompts: []string{promptProse, promptDates}},
	{name: "llama-q4_k", arch: "llama", typ: gguf.Q4_K, vocab: 4096, prompts: []string{"SELECT name FROM users WHERE id = 42;", promptCode}},
	{name: "llama-q4_k-untied", arch: "llama", typ: gguf.Q4_K, vocab: 4096, untied: true, prompts: []string{"Once upon a time, in a land far away,", promptDates}},
	// qwen2: synth's tiny (q/k/v biases, no q/k norms, NeoX RoPE).
	{name: "qwen2-f16", arch: "qwen2", typ: gguf.F16, vocab: 4096, prompts: []string{"Hello, world! Hello, bonsai!", promptCode}},
	{name: "qwen2-q8_0", arch: "qwen2", typ: gguf.Q8_0, vocab: 4096, prompts: []string{promptDates, promptProse}},
	{name: "qwen2-q4_k", arch: "qwen2", typ: gguf.Q4_K, vocab: 4096, prompts: []string{"The mitochondria is the powerhouse", promptCode}},
	{name: "qwen2-q8_0-untied", arch: "qwen2", typ: gguf.Q8_0, vocab: 4096, untied: true, prompts: []string{"Roses are red, violets are blue", promptProse}},
	// gemma3: synth's tiny (six layers, five local with their own RoPE
	// base, one global; scaled embeddings, post-norms, GELU FFN), its
	// prompts within the sliding window (swa_test.go runs past one).
	{name: "gemma3-f16", arch: "gemma3", typ: gguf.F16, vocab: 4096, prompts: []string{"To be, or not to be: that is", promptDates}},
	{name: "gemma3-q8_0", arch: "gemma3", typ: gguf.Q8_0, vocab: 4096, prompts: []string{promptProse, promptCode}},
	{name: "gemma3-q5_0", arch: "gemma3", typ: gguf.Q5_0, vocab: 4096, prompts: []string{promptProse, promptDates}},
	{name: "gemma3-q4_k", arch: "gemma3", typ: gguf.Q4_K, vocab: 4096, prompts: []string{"SELECT name FROM users WHERE id = 42;", promptDates}},
}

// golden is llama.cpp's answer for one case, with what it takes to rebuild
// the exact model it was asked about.
type golden struct {
	Arch        string      `json:"arch,omitempty"` // "" is qwen3
	Shape       string      `json:"shape"`
	Type        string      `json:"type"`
	Vocab       int         `json:"vocab"`
	Layers      int         `json:"layers"`
	Tied        bool        `json:"tied"`
	Seed        uint64      `json:"seed"`
	ModelSHA256 string      `json:"model_sha256"`
	Runs        []promptRun `json:"runs"`
}

// promptRun is llama.cpp's greedy continuation of one raw prompt.
type promptRun struct {
	Prompt string `json:"prompt"`
	oracleRun
}

func goldenPath(name string) string { return filepath.Join("testdata", name+".json") }

func readGolden(name string) (golden, error) {
	b, err := os.ReadFile(goldenPath(name))
	if err != nil {
		return golden{}, fmt.Errorf("%w (run `go test ./infer/parity -update` with the oracle installed)", err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		return golden{}, fmt.Errorf("%s: %w", goldenPath(name), err)
	}
	return g, nil
}

func writeGolden(name string, g golden) error {
	b, err := json.MarshalIndent(g, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(goldenPath(name), append(b, '\n'), 0o644)
}

// options rebuilds the synth options of a case with a seed.
func (c modelCase) options(t *testing.T, seed uint64) synth.Options {
	t.Helper()
	arch := c.arch
	if arch == "" {
		arch = "qwen3"
	}
	s, err := synth.ArchShape(arch, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	if c.vocab != 0 {
		s.Vocab = c.vocab
	}
	s.Tied = !c.untied
	return synth.Options{Shape: s, Type: c.typ, Seed: seed}
}

// models caches generated model files for the whole test binary.
var models = struct {
	sync.Mutex
	dir   string
	paths map[string]string
}{paths: map[string]string{}}

// modelFile generates (once) the model of o and returns its path and
// SHA-256.
func modelFile(t *testing.T, o synth.Options) (path, sum string) {
	t.Helper()
	models.Lock()
	defer models.Unlock()
	key := fmt.Sprintf("%s%s-%s-v%d-l%d-t%v-w%d-s%d", o.Shape.Arch, o.Shape.Name, strings.ToLower(o.Type.String()), o.Shape.Vocab, o.Shape.Layers, o.Shape.Tied, o.Shape.Window, o.Seed)
	if p, ok := models.paths[key]; ok {
		return p, models.paths[key+"#sha"]
	}
	if models.dir == "" {
		dir, err := os.MkdirTemp("", "bonsai-parity-")
		if err != nil {
			t.Fatal(err)
		}
		models.dir = dir
	}
	p := filepath.Join(models.dir, key+".gguf")
	if err := synth.Write(p, o); err != nil {
		t.Fatalf("generating %s: %v", key, err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	models.paths[key], models.paths[key+"#sha"] = p, sum
	return p, sum
}

func TestMain(m *testing.M) {
	flag.Parse()
	f, err := quant.ParseFeatures(*cpuFeatures)
	if err == nil {
		err = quant.SetFeatures(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "parity:", err)
		os.Exit(2)
	}
	code := m.Run()
	if models.dir != "" {
		os.RemoveAll(models.dir)
	}
	os.Exit(code)
}
