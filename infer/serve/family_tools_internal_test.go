package serve

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/openai"
	"github.com/bonsai-chat/bonsai/infer/synth"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// SPMFamilyFile is spmFamilyFile for the package's external tests.
var SPMFamilyFile = spmFamilyFile

// spmFamilyFile writes a synthetic tiny model of a family whose files carry
// a SentencePiece vocabulary: llama.cpp's Llama 2 one (cut) with the
// family's control tokens added, and the family's own chat template.
//   - "mistral": the llama architecture, Mistral Nemo's template with its
//     [INST], [TOOL_CALLS], [AVAILABLE_TOOLS] and [TOOL_RESULTS] tokens.
//   - "mistral-v11": the same with Mistral Small 3.2's template and the v11
//     tokenizer's [TOOL_CALLS]name[CALL_ID]id[ARGS]{…} tokens.
//   - "gemma3": the gemma3 architecture, Gemma 3's template (which writes
//     no tools) with <start_of_turn> and <end_of_turn>, no space prefix.
func spmFamilyFile(t testing.TB, family string) *gguf.File {
	t.Helper()
	v, err := synth.LlamaSPMVocab(1024)
	if err != nil {
		t.Fatal(err)
	}
	const control = 3
	var shape synth.Shape
	var tmpl string
	switch family {
	case "mistral":
		shape, tmpl = synth.LlamaShapes["tiny"], "mistralai-Mistral-Nemo-Instruct-2407.jinja"
		for _, tok := range []string{"[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"} {
			v.Add(tok, control)
		}
	case "mistral-v11":
		shape, tmpl = synth.LlamaShapes["tiny"], "Mistral-Small-3.2-24B-Instruct-2506.jinja"
		for _, tok := range []string{"[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[/INST]", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]",
			"[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[TOOL_CONTENT]", "[/TOOL_RESULTS]"} {
			v.Add(tok, control)
		}
	case "gemma3":
		shape, tmpl = synth.Gemma3Shapes["tiny"], "google-gemma-3-it.jinja"
		v.AddSpacePrefix = false
		v.Add("<start_of_turn>", control)
		v.Add("<end_of_turn>", control)
	default:
		t.Fatalf("no family %q", family)
	}
	src, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "templates", tmpl))
	if err != nil {
		t.Fatal(err)
	}
	shape.Vocab = len(v.Tokens)
	dir := t.TempDir()
	path := filepath.Join(dir, family+".gguf")
	if err := synth.Write(path, synth.Options{Shape: shape, Type: gguf.Q8_0, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	if err := synth.ReplaceVocab(path, v); err != nil {
		t.Fatal(err)
	}
	// The template goes in as the file's tokenizer.chat_template.
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for _, k := range f.KV.Keys() {
		val, _ := f.KV.Get(k)
		w.Set(k, val)
	}
	w.Set("tokenizer.chat_template", string(src))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := w.AddTensor(ti.Name, ti.Type, ti.Shape, f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, family+"-templated.gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if f, err = gguf.Open(out); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

const weatherTools = `[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", ` +
	`"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]`

// A tool conversation as a client sends it back: the call with the id the
// client got (another server's, here), and its result.
const weatherTurns = `[{"role": "user", "content": "Weather in Paris?"}, ` +
	`{"role": "assistant", "content": null, "tool_calls": [{"id": "call_0123456789abcdef", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}, ` +
	`{"role": "tool", "tool_call_id": "call_0123456789abcdef", "content": "{\"temp\": 21}"}]`

// familyPrompt is the server's prompt for a chat request body on f: its
// text, the control tokens in it, and its ids.
func familyPrompt(t *testing.T, f *gguf.File, body string) (string, []int32, []int32) {
	t.Helper()
	m, err := LoadFile(f, LoadOptions{Slots: 1, Context: 2048, Threads: 1, Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var req openai.ChatRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	call, aerr := New(Options{}).prepareChat(context.Background(), m, &req)
	if aerr != nil {
		t.Fatalf("%s: %s", body, aerr.msg)
	}
	var controls []int32
	for _, id := range call.prompt {
		if m.Tok.IsControl(id) {
			controls = append(controls, id)
		}
	}
	return m.Tok.Decode(call.prompt), controls, call.prompt
}

// Mistral Nemo's template writes the tools before the last user turn, the
// call as [TOOL_CALLS] JSON and its result as [TOOL_RESULTS], each with
// the call's id, which it wants as 9 letters and digits: a client's
// "call_…" id is mapped to one, the same for the call and its result, and
// the markers are the control tokens.
func TestMistralToolPrompt(t *testing.T) {
	id := mistralID("call_0123456789abcdef")
	for _, c := range []struct {
		family   string
		want     []string
		controls []string
	}{
		{"mistral", []string{`"id": "` + id + `"}]</s>`, `"call_id": "` + id + `"}[/TOOL_RESULTS]`},
			[]string{"[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[INST]", "[/INST]", "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"}},
		{"mistral-v11", []string{`[TOOL_CALLS]get_weather[CALL_ID]` + id + `[ARGS]{"city": "Paris"}</s>`, `[TOOL_RESULTS]` + id + `[TOOL_CONTENT]`},
			[]string{"[SYSTEM_PROMPT]", "[AVAILABLE_TOOLS]", "[INST]", "[TOOL_CALLS]", "[CALL_ID]", "[ARGS]", "[TOOL_RESULTS]", "[TOOL_CONTENT]"}},
	} {
		f := spmFamilyFile(t, c.family)
		text, controls, ids := familyPrompt(t, f, `{"messages": `+weatherTurns+`, "tools": `+weatherTools+`}`)
		// The template rendered as llama.cpp renders it, given the id mapped.
		msgs := strings.ReplaceAll(weatherTurns, "call_0123456789abcdef", id)
		msgs = strings.ReplaceAll(msgs, `"arguments": "{\"city\": \"Paris\"}"`, `"arguments": {"city": "Paris"}`)
		if want := templateIDs(t, f, msgs, weatherTools); !slices.Equal(ids, want) {
			t.Errorf("%s: server   %q\ntemplate %q", c.family, text, m2s(t, f, want))
		}
		for _, want := range c.want {
			if !strings.Contains(strings.ReplaceAll(text, "] ", "]"), want) {
				t.Errorf("%s: the prompt lacks %q:\n%s", c.family, want, text)
			}
		}
		tokens, _ := f.KV.Strings("tokenizer.ggml.tokens")
		for _, s := range c.controls {
			if !slices.Contains(controls, int32(slices.Index(tokens, s))) {
				t.Errorf("%s: %s is not a control token in the prompt", c.family, s)
			}
		}
	}
}

// m2s decodes ids with f's tokenizer.
func m2s(t *testing.T, f *gguf.File, ids []int32) string {
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Decode(ids)
}

// Gemma 3's template writes no tools: the generic format puts them, and
// the instruction to answer in JSON, into the system prompt (which Gemma's
// template puts into the first user turn), the call as the JSON asked for,
// and its result as a user turn, the turns alternating as the template
// demands.
func TestGemma3ToolPrompt(t *testing.T) {
	f := spmFamilyFile(t, "gemma3")
	body := `{"messages": [{"role": "system", "content": "Be brief."}] , "tools": ` + weatherTools + `}`
	body = strings.Replace(body, `]`, `, `+weatherTurns[1:], 1)
	text, _, _ := familyPrompt(t, f, body)
	for _, want := range []string{
		"<start_of_turn>user\nBe brief.\n\n" + genericAsk + "\n\nYou can call any of the following tools to satisfy the user's requests: [\n  {\n    \"type\": \"function\",\n    \"function\": {\n      \"name\": \"get_weather\"",
		"Weather in Paris?<end_of_turn>\n<start_of_turn>model\n{\n  \"tool_call\": {\n    \"name\": \"get_weather\",\n    \"arguments\": {\n      \"city\": \"Paris\"\n    },\n    \"id\": \"call_0123456789abcdef\"\n  }\n}<end_of_turn>\n",
		"<start_of_turn>user\n{\n  \"tool_response\": {\n    \"tool\": \"get_weather\",\n    \"content\": \"{\\\"temp\\\": 21}\",\n    \"tool_call_id\": \"call_0123456789abcdef\"\n  }\n}<end_of_turn>\n<start_of_turn>model\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, text)
		}
	}
	// Two results in a row are one user turn: the template raises on two.
	two := strings.Replace(body, `{"role": "tool"`, `{"role": "tool", "tool_call_id": "x", "content": "1"}, {"role": "tool"`, 1)
	if text, _, _ := familyPrompt(t, f, two); strings.Count(text, "<start_of_turn>user") != 2 {
		t.Errorf("two results:\n%s", text)
	}
}
