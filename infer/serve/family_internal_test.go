package serve

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/chat/jinja"
	"github.com/bonsai-chat/bonsai/infer/openai"
	"github.com/bonsai-chat/bonsai/infer/synth"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// familyFile writes a synthetic model of arch's tiny shape (its real
// tokenizer, cut, and its real chat template: Llama 3.2's for llama,
// Qwen2.5's for qwen2).
func familyFile(t testing.TB, arch string) *gguf.File {
	t.Helper()
	shapes := map[string]map[string]synth.Shape{"llama": synth.LlamaShapes, "qwen2": synth.Qwen2Shapes}
	s := shapes[arch]["tiny"]
	s.Vocab = 2048
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := synth.Write(path, synth.Options{Shape: s, Type: gguf.Q8_0, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// templateIDs is the prompt as llama.cpp makes it: the file's template
// rendered with the messages (and tools), a BOS the template writes dropped
// where the tokenizer adds its own, and the text tokenized whole with its
// special tokens parsed.
func templateIDs(t testing.TB, f *gguf.File, msgs, tools string) []int32 {
	t.Helper()
	src, _ := f.KV.String("tokenizer.chat_template")
	tpl, err := jinja.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := f.KV.Strings("tokenizer.ggml.tokens")
	bosID, _ := f.KV.Uint("tokenizer.ggml.bos_token_id")
	eosID, _ := f.KV.Uint("tokenizer.ggml.eos_token_id")
	vars := jinja.NewDict()
	vars.Set("add_generation_prompt", true)
	vars.Set("bos_token", jinja.Text(tokens[bosID]))
	vars.Set("eos_token", jinja.Text(tokens[eosID]))
	// Parsed keeping the keys' order, as llama.cpp's ordered JSON does.
	m, err := jinja.FromJSON([]byte(msgs), true)
	if err != nil {
		t.Fatal(err)
	}
	vars.Set("messages", m)
	if tools != "" {
		tl, err := jinja.FromJSON([]byte(tools), true)
		if err != nil {
			t.Fatal(err)
		}
		vars.Set("tools", tl)
	}
	out, err := tpl.RenderValues(vars, jinja.Options{})
	if err != nil {
		t.Fatal(err)
	}
	text := out.S
	var ids []int32
	if tok.AddBOS() {
		text = strings.TrimPrefix(text, tokens[bosID])
		ids = append(ids, tok.BOS())
	}
	return append(ids, tok.Encode(text, true)...)
}

// The server's prompt for a chat request is the template's, token for
// token, for Llama 3.2's template (rendered by the Jinja engine, tools and
// tool calls included) and Qwen2.5's (recognised as ChatML).
func TestFamilyPromptIDs(t *testing.T) {
	const tools = `[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", ` +
		`"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]`
	for _, c := range []struct {
		arch, msgs, tools string
	}{
		{"llama", `[{"role": "user", "content": "Hello there"}]`, ""},
		{"llama", `[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "And again"}]`, ""},
		{"llama", `[{"role": "user", "content": "Weather in Paris?"}]`, tools},
		{"llama", `[{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}]`, tools},
		{"qwen2", `[{"role": "user", "content": "Hello there"}]`, ""},
		{"qwen2", `[{"role": "user", "content": "Weather in Paris?"}]`, tools},
		{"qwen2", `[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}]`, tools},
		{"qwen2", `[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Again"}]`, ""},
	} {
		f := familyFile(t, c.arch)
		m, err := LoadFile(f, LoadOptions{Slots: 1, Context: 512, Threads: 1, Backend: "cpu"})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		req := openai.ChatRequest{}
		body := `{"messages": ` + c.msgs
		if c.tools != "" {
			body += `, "tools": ` + c.tools
		}
		// The API takes a call's arguments as JSON text.
		body = strings.ReplaceAll(body, `"arguments": {"city": "Paris"}`, `"arguments": "{\"city\": \"Paris\"}"`)
		if err := json.Unmarshal([]byte(body+"}"), &req); err != nil {
			t.Fatal(err)
		}
		call, aerr := New(Options{}).prepareChat(context.Background(), m, &req)
		if aerr != nil {
			t.Fatalf("%s %s: %v", c.arch, c.msgs, aerr.msg)
		}
		want := templateIDs(t, f, c.msgs, c.tools)
		if !slices.Equal(call.prompt, want) {
			t.Errorf("%s %s:\nserver   %v\ntemplate %v\n%q", c.arch, c.msgs, call.prompt, want, m.Tok.Decode(want))
		}
	}
}

// An assistant prefill on Llama 3.2's template, with tools or without, is
// the finished conversation's prompt less the <|eot_id|> that closes the
// last turn.
func TestLlama3Prefill(t *testing.T) {
	f := familyFile(t, "llama")
	m, err := LoadFile(f, LoadOptions{Slots: 1, Context: 1024, Threads: 1, Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const tools = `[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]`
	for _, tl := range []string{"", tools} {
		body := `{"messages": [{"role": "user", "content": "Quote Paul"}, {"role": "assistant", "content": "Grace be"}]`
		if tl != "" {
			body += `, "tools": ` + tl
		}
		var req openai.ChatRequest
		if err := json.Unmarshal([]byte(body+"}"), &req); err != nil {
			t.Fatal(err)
		}
		call, aerr := New(Options{}).prepareChat(context.Background(), m, &req)
		if aerr != nil {
			t.Fatal(aerr.msg)
		}
		closed := templateIDs(t, f, `[{"role": "user", "content": "Quote Paul"}, {"role": "assistant", "content": "Grace be"}]`, tl)
		// templateIDs adds the generation prompt, which has no <|eot_id|>:
		// the last one closes the assistant's turn.
		eot, _ := m.Tok.ID("<|eot_id|>")
		end := -1
		for i, id := range closed {
			if id == eot {
				end = i
			}
		}
		if want := closed[:end]; !slices.Equal(call.prompt, want) {
			t.Errorf("tools %q: prefill %q\nwant    %q", tl, m.Tok.Decode(call.prompt), m.Tok.Decode(want))
		}
	}
}
