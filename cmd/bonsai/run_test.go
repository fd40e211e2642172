package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

// These tests run the embedded default model (bonsai-tiny) on the CPU.

func TestRunJSONL(t *testing.T) {
	out, errOut, code := run(t, "run", "--backend", "cpu", "--temp", "0", "--max-tokens", "4",
		"--format", "jsonl", "--top-logits", "3", "In the beginning")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var tokens int
	var done map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if line["done"] == true {
			done = line
			continue
		}
		tokens++
		top, ok := line["top"].([]any)
		if !ok || len(top) != 3 {
			t.Fatalf("token line without 3 top logits: %q", sc.Text())
		}
		first := top[0].([]any)
		if first[0].(float64) != line["id"].(float64) {
			t.Errorf("greedy token %v is not the top logit %v", line["id"], first)
		}
		for i := 1; i < len(top); i++ {
			if top[i].([]any)[1].(float64) > top[i-1].([]any)[1].(float64) {
				t.Errorf("top logits not in descending order: %v", top)
			}
		}
		if _, ok := line["text"].(string); !ok {
			t.Errorf("token line without text: %q", sc.Text())
		}
	}
	if done == nil {
		t.Fatalf("no final done line in %q", out)
	}
	if int(done["generated_tokens"].(float64)) != tokens || done["backend"] != "cpu" || done["prompt_tokens"].(float64) < 5 {
		t.Errorf("done line %v after %d tokens", done, tokens)
	}
	if r := done["reason"]; r != "length" && r != "stop" {
		t.Errorf("reason %v", r)
	}
}

func TestRunIsDeterministicForASeed(t *testing.T) {
	args := []string{"run", "--backend", "cpu", "--temp", "0.9", "--seed", "7", "--max-tokens", "12", "Blessed are"}
	a, errA, codeA := run(t, args...)
	b, _, codeB := run(t, args...)
	if codeA != 0 || codeB != 0 {
		t.Fatalf("exit %d, %d: %s", codeA, codeB, errA)
	}
	if a != b || strings.TrimSpace(a) == "" {
		t.Errorf("same seed, different or empty output:\n%q\n%q", a, b)
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"run"},
		{"run", "a", "b"},
		{"run", "--format", "xml", "hi"},
		{"run", "--top-p", "2", "hi"},
		{"run", "--ctx", "-1", "hi"},
		{"tokenize"},
		{"tokenize", "--format", "bytes", "hi"},
		{"info", "a", "b"},
	} {
		if _, errOut, code := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage); stderr %q", args, code, errOut)
		}
	}
	if _, errOut, code := run(t, "run", "--model", "/nonexistent/model.gguf", "hi"); code != 1 || !strings.Contains(errOut, "nonexistent") {
		t.Errorf("missing model file: exit %d, stderr %q", code, errOut)
	}
}

func TestTokenizeCommand(t *testing.T) {
	out, errOut, code := run(t, "tokenize", "Hello world<|im_end|>")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// Qwen's ids for "Hello", " world" and the special <|im_end|>.
	if got := strings.TrimSpace(out); got != "9707 1879 151645" {
		t.Errorf("tokenize = %q", got)
	}
	out, _, _ = run(t, "tokenize", "--special=false", "--format", "pieces", "<|im_end|>")
	if strings.Contains(out, "151645") {
		t.Errorf("--special=false still parsed the special token: %q", out)
	}
}

func TestInfoCommand(t *testing.T) {
	out, errOut, code := run(t, "info", "--ctx", "2048")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"architecture  qwen3", "bonsai-tiny", "6 layers, hidden 384", "q1_0", "KV cache for 2048 tokens"} {
		if !strings.Contains(out, want) {
			t.Errorf("info output lacks %q:\n%s", want, out)
		}
	}
}

// A reply cut by --max-tokens or by the context says so on stderr; one the
// model ended does not.
func TestRunSaysWhenTheReplyWasCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"max tokens", []string{"--max-tokens", "3"}, "cut off at --max-tokens 3"},
		{"context", []string{"--ctx", "16"}, "the context (16 tokens) is full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--backend", "cpu", "--temp", "0"}, tc.args...)
			out, errOut, code := run(t, append(args, "hi")...)
			if code != 0 || strings.TrimSpace(out) == "" {
				t.Fatalf("exit %d, stdout %q: %s", code, out, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q does not say %q", errOut, tc.want)
			}
		})
	}
}

// The profile table starts on a line of its own, after the reply's.
func TestRunProfileStartsOnItsOwnLine(t *testing.T) {
	var both strings.Builder
	code := runMain([]string{"run", "--backend", "cpu", "--temp", "0", "--max-tokens", "3", "--profile", "hi"}, &both, &both)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, both.String())
	}
	i := strings.Index(both.String(), "profile (")
	if i <= 0 || both.String()[i-1] != '\n' {
		t.Errorf("the profile table does not start a line:\n%s", both.String())
	}
}

// info sizes the default context by the chat's rule (4096 capped by the
// model's trained context): 1,024 for the built-in model, with no warning.
func TestInfoUsesTheChatsDefaultContext(t *testing.T) {
	isolatedXDG(t)
	out, errOut, code := run(t, "info")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "KV cache for 1024 tokens") || strings.Contains(out, "beyond") {
		t.Errorf("info on the built-in model:\n%s", out)
	}
}
