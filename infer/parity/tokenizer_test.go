package parity

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// tokenizerPrompts cover what the Qwen pre-tokenizer and byte-level BPE
// treat specially: spaces and newlines in runs, digits (split one by one),
// contractions, punctuation, code, accents, CJK, emoji (multi-codepoint and
// 4-byte), invisible characters, and special tokens written as text.
var tokenizerPrompts = []string{
	"Hello world",
	" Hello  world ",
	"The quick brown fox jumps over the lazy dog.",
	"I'm sure you'll see they've done it; we'd've known.",
	"3.14159 2718 1000000 -42 +7 1e-9 0x1F 12,345.67",
	"func main() {\n\tfmt.Println(\"héllo\")\n}\n",
	"def f(x):\n    return x**2  # square\n\n\n",
	"    indented\n\n\n  \t mixed \r\n line",
	"naïve café résumé Zürich Ångström",
	"日本語のテキストと中文文本，还有한국어.",
	"Emoji: 🌳🌲🎋 👩‍👩‍👧‍👦 🇫🇷 ✔️",
	"Math: ∑ x² ≤ ∞, α→β, ½ ⅓",
	"zero\u200bwidth and non\u00a0breaking",
	"<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
	"<think>\nreasoning\n</think>\n\nanswer<|endoftext|>",
	"<tool_call>{\"name\": \"f\"}</tool_call> <|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
	"<|im_start|><|im_start|> <|im_end|>x<|not_a_token|>",
	"<|fim_pad|><|repo_name|>r<|file_sep|>f<|box_start|>1<|box_end|><tool_response>x</tool_response>",
	"URLs: https://example.com/a?b=c&d=e#f and mail@example.org",
	"ALLCAPS and MiXeD CaSe, snake_case, camelCase, kebab-case",
	"Ünïcödé\u0301 combining and precomposed é é",
	"",
	" ",
	"\n",
	"a",
}

// tokenizeGolden is llama.cpp's tokenization of tokenizerPrompts with the
// Qwen3 tokenizer that synth writes: Plain parses special tokens as text,
// Special recognises them (llama.cpp's parse_special).
type tokenizeGolden struct {
	Prompts []string  `json:"prompts"`
	Plain   [][]int32 `json:"plain"`
	Special [][]int32 `json:"special"`
}

const tokenizeGoldenFile = "tokenize.json"

func TestTokenizerParity(t *testing.T) {
	// Any full-vocab synthetic model carries the real Qwen3 tokenizer.
	c := modelCases[0]
	if c.vocab != 0 {
		t.Fatal("modelCases[0] must use the real Qwen vocab")
	}
	path, _ := modelFile(t, c.options(t, 1))

	golden, err := tokenizerGolden(t, path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range golden.Prompts {
		for _, mode := range []struct {
			special bool
			want    []int32
		}{{false, golden.Plain[i]}, {true, golden.Special[i]}} {
			if got := tok.Encode(p, mode.special); !equalIDs(got, mode.want) {
				t.Errorf("Encode(%q, special=%v)\n got       %v\n llama.cpp %v", p, mode.special, got, mode.want)
			}
		}
	}
}

// tokenizerGolden reads the stored llama.cpp tokenization, rewriting it
// under -update; where the oracle is installed it also asks llama.cpp now
// and requires the stored answer to match.
func tokenizerGolden(t *testing.T, model string) (tokenizeGolden, error) {
	t.Helper()
	path := filepath.Join("testdata", tokenizeGoldenFile)
	if *update {
		requireOracle(t)
		g, err := tokenizeLive(model)
		if err != nil {
			return g, err
		}
		b, err := json.MarshalIndent(g, "", " ")
		if err != nil {
			return g, err
		}
		return g, os.WriteFile(path, append(b, '\n'), 0o644)
	}
	var g tokenizeGolden
	b, err := os.ReadFile(path)
	if err != nil {
		return g, fmt.Errorf("%w (run `go test ./infer/parity -update` with the oracle installed)", err)
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("%s: %w", path, err)
	}
	if len(g.Prompts) != len(tokenizerPrompts) || len(g.Plain) != len(g.Prompts) || len(g.Special) != len(g.Prompts) {
		return g, fmt.Errorf("%s is stale (%d prompts, the test has %d): rerun -update", path, len(g.Prompts), len(tokenizerPrompts))
	}
	for i, p := range tokenizerPrompts {
		if g.Prompts[i] != p {
			return g, fmt.Errorf("%s is stale (prompt %d differs): rerun -update", path, i)
		}
	}
	if err := oracleMissing(); err != nil {
		if inCI {
			t.Fatalf("CI=true but the llama.cpp oracle cannot run: %v", err)
		}
		t.Logf("live llama.cpp check skipped (golden only): %v", err)
		return g, nil
	}
	live, err := tokenizeLive(model)
	if err != nil {
		return g, err
	}
	for i := range g.Prompts {
		if !equalIDs(live.Plain[i], g.Plain[i]) || !equalIDs(live.Special[i], g.Special[i]) {
			return g, fmt.Errorf("llama.cpp now tokenizes %q as %v / %v, %s says %v / %v: rerun -update", g.Prompts[i], live.Plain[i], live.Special[i], path, g.Plain[i], g.Special[i])
		}
	}
	return g, nil
}

func tokenizeLive(model string) (tokenizeGolden, error) {
	g := tokenizeGolden{Prompts: tokenizerPrompts}
	var err error
	if g.Plain, err = oracleTokenize(model, tokenizerPrompts, false); err != nil {
		return g, err
	}
	g.Special, err = oracleTokenize(model, tokenizerPrompts, true)
	return g, err
}
