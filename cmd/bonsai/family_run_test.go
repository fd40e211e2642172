package main

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/chat/jinja"
)

// renderedPrompt is the file's chat template rendered for one user
// message as llama.cpp renders it, less the BOS its tokenizer adds.
func renderedPrompt(t *testing.T, path, user string) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, _ := f.KV.String("tokenizer.chat_template")
	tpl, err := jinja.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := f.KV.Strings("tokenizer.ggml.tokens")
	bos, _ := f.KV.Uint("tokenizer.ggml.bos_token_id")
	out, err := tpl.Render(map[string]any{"messages": []any{map[string]any{"role": "user", "content": user}},
		"add_generation_prompt": true, "bos_token": tokens[bos]}, jinja.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if add, _ := f.KV.Bool("tokenizer.ggml.add_bos_token"); add {
		return strings.TrimPrefix(out.S, tokens[bos])
	}
	return out.S
}

// runTokens runs `bonsai run --format jsonl` and returns the reply's token
// ids and the prompt's length.
func runTokens(t *testing.T, args ...string) ([]int32, int) {
	t.Helper()
	out, errOut, code := run(t, append([]string{"run", "--backend", "cpu", "--threads", "1", "--temp", "0", "--max-tokens", "8",
		"--format", "jsonl", "--no-save"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var ids []int32
	prompt := -1
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var line struct {
			ID     *int32 `json:"id"`
			Done   bool   `json:"done"`
			Prompt int    `json:"prompt_tokens"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		switch {
		case line.Done:
			prompt = line.Prompt
		case line.ID != nil:
			ids = append(ids, *line.ID)
		}
	}
	return ids, prompt
}

// `bonsai run` on a Llama 3.2- and a Qwen2.5-templated model prompts the
// model as llama.cpp does: its reply and prompt length are those of the
// template rendered and tokenized whole (`bonsai run --raw` of that text).
func TestRunUsesTheFilesTemplate(t *testing.T) {
	isolatedXDG(t)
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), arch+".gguf")
			if _, errOut, code := run(t, "synth", "--arch", arch, "--type", "q8_0", "--vocab", "2048", "--seed", "5", "-o", path); code != 0 {
				t.Fatalf("synth: %s", errOut)
			}
			const user = "Say hello"
			got, gotPrompt := runTokens(t, "--model", path, user)
			want, wantPrompt := runTokens(t, "--model", path, "--raw", "--", renderedPrompt(t, path, user))
			if len(got) == 0 || !slices.Equal(got, want) || gotPrompt != wantPrompt {
				t.Errorf("run: %v after %d prompt tokens\nraw template text: %v after %d", got, gotPrompt, want, wantPrompt)
			}
		})
	}
}
