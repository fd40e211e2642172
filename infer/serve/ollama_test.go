package serve_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	ollama "github.com/ollama/ollama/api"
	oai "github.com/openai/openai-go/v3"

	"github.com/bonsai-chat/bonsai/infer/serve"
)

func (s *testServer) ollama(t *testing.T) *ollama.Client {
	u, err := url.Parse(s.root)
	if err != nil {
		t.Fatal(err)
	}
	return ollama.NewClient(u, http.DefaultClient)
}

var ollamaGreedy = map[string]any{"temperature": 0, "num_predict": 24}

func TestOllamaModelRoutes(t *testing.T) {
	s := startServer(t, "", 1)
	c := s.ollama(t)
	ctx := context.Background()
	if err := c.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Version(ctx); err != nil || v == "" {
		t.Errorf("version %q, %v", v, err)
	}
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 1 || list.Models[0].Name != testModel+":latest" || list.Models[0].Size == 0 ||
		list.Models[0].Details.Format != "gguf" || list.Models[0].Details.Family != "qwen3" || len(list.Models[0].Digest) != 64 {
		t.Errorf("tags %+v", list.Models)
	}
	ps, err := c.ListRunning(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.Models) != 1 || ps.Models[0].Name != testModel+":latest" || ps.Models[0].ContextLength != 384 {
		t.Errorf("ps %+v", ps.Models)
	}
	for _, name := range []string{testModel, testModel + ":latest"} {
		show, err := c.Show(ctx, &ollama.ShowRequest{Model: name})
		if err != nil {
			t.Fatal(err)
		}
		if show.ModelInfo["general.architecture"] != "qwen3" || show.ModelInfo["qwen3.embedding_length"] != float64(128) ||
			!slices.Contains(show.Capabilities, "completion") || show.Details.Family != "qwen3" {
			t.Errorf("show %q: %+v", name, show)
		}
	}
}

func TestOllamaChatAndGenerate(t *testing.T) {
	s := startServer(t, "", 2)
	c := s.ollama(t)
	ctx := context.Background()
	want := greedyReply(t, s, "Be brief.", "Say hello", 24)
	msgs := []ollama.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Say hello"}}

	// Streamed by default: chunks, then one done with the counts. How many
	// chunks the text comes in depends on how the tokens meet the
	// writer's flushes (a loaded machine coalesces them), so at least one
	// before the done.
	var text strings.Builder
	var chunks []ollama.ChatResponse
	err := c.Chat(ctx, &ollama.ChatRequest{Model: testModel, Messages: msgs, Options: ollamaGreedy}, func(r ollama.ChatResponse) error {
		text.WriteString(r.Message.Content)
		chunks = append(chunks, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	last := chunks[len(chunks)-1]
	if text.String() != want || want == "" || len(chunks) < 2 || !last.Done || slices.ContainsFunc(chunks[:len(chunks)-1], func(r ollama.ChatResponse) bool { return r.Done }) {
		t.Fatalf("streamed %q in %d chunks, want %q", text.String(), len(chunks), want)
	}
	if (last.DoneReason != "stop" && last.DoneReason != "length") || last.EvalCount == 0 || last.PromptEvalCount == 0 || last.TotalDuration <= 0 ||
		(last.DoneReason == "length") != (last.EvalCount == 24) {
		t.Errorf("last chunk %+v", last)
	}

	// stream: false is one object.
	off := false
	n := 0
	err = c.Chat(ctx, &ollama.ChatRequest{Model: testModel + ":latest", Messages: msgs, Options: ollamaGreedy, Stream: &off}, func(r ollama.ChatResponse) error {
		n++
		if !r.Done || r.Message.Content != want || r.Message.Role != "assistant" {
			t.Errorf("whole reply %+v", r)
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Errorf("%d replies, %v", n, err)
	}

	// Generate: system and prompt through the template, whole or streamed.
	for _, stream := range []bool{false, true} {
		var out strings.Builder
		done := 0
		err := c.Generate(ctx, &ollama.GenerateRequest{Model: testModel, System: "Be brief.", Prompt: "Say hello", Options: ollamaGreedy, Stream: &stream},
			func(r ollama.GenerateResponse) error {
				out.WriteString(r.Response)
				if r.Done {
					done++
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != want || done != 1 {
			t.Errorf("generate (stream %v): %q, %d done; want %q", stream, out.String(), done, want)
		}
	}

	// raw: the prompt as it is, as /v1/completions takes it.
	comp, err := s.client().Completions.New(ctx, oai.CompletionNewParams{Model: testModel, Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon a time")},
		MaxTokens: oai.Int(16), Temperature: oai.Float(0)})
	if err != nil {
		t.Fatal(err)
	}
	var raw strings.Builder
	err = c.Generate(ctx, &ollama.GenerateRequest{Model: testModel, Prompt: "Once upon a time", Raw: true, Options: map[string]any{"temperature": 0, "num_predict": 16}},
		func(r ollama.GenerateResponse) error { raw.WriteString(r.Response); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if raw.String() != comp.Choices[0].Text {
		t.Errorf("raw generate %q, completion %q", raw.String(), comp.Choices[0].Text)
	}

	// An empty prompt loads the model, as ollama's does.
	err = c.Generate(ctx, &ollama.GenerateRequest{Model: testModel}, func(r ollama.GenerateResponse) error {
		if !r.Done || r.DoneReason != "load" {
			t.Errorf("empty prompt: %+v", r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// format: "json" or a schema goes through the grammar; tools and the
// calls and results of earlier turns go into the template.
func TestOllamaFormatAndTools(t *testing.T) {
	s := startServer(t, "", 2)
	c := s.ollama(t)
	ctx := context.Background()
	off := false
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":10},"warm":{"type":"boolean"}},"required":["city","warm"]}`)
	for _, format := range []json.RawMessage{json.RawMessage(`"json"`), schema} {
		err := c.Chat(ctx, &ollama.ChatRequest{Model: testModel, Format: format, Stream: &off, Options: map[string]any{"temperature": 1, "seed": 3, "num_predict": 120},
			Messages: []ollama.Message{{Role: "user", Content: "Describe Paris"}}}, func(r ollama.ChatResponse) error {
			var v map[string]any
			if string(format) == `"json"` && r.DoneReason == "length" {
				// Any object: a random model's may not end within the
				// limit, but it is one from the first byte.
				if !strings.HasPrefix(r.Message.Content, "{") {
					t.Errorf(`format "json": %q`, r.Message.Content)
				}
				return nil
			}
			if err := json.Unmarshal([]byte(r.Message.Content), &v); err != nil {
				t.Errorf("format %s: %q is not JSON (%s)", format, r.Message.Content, r.DoneReason)
			}
			if string(format) != `"json"` {
				city, ok := v["city"].(string)
				if _, warm := v["warm"].(bool); !ok || !warm || len([]rune(city)) > 10 {
					t.Errorf("%q does not fit the schema", r.Message.Content)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	props := ollama.NewToolPropertiesMap()
	props.Set("city", ollama.ToolProperty{Type: ollama.PropertyType{"string"}})
	tools := ollama.Tools{{Type: "function", Function: ollama.ToolFunction{Name: "get_weather",
		Parameters: ollama.ToolFunctionParameters{Type: "object", Required: []string{"city"}, Properties: props}}}}
	args := ollama.NewToolCallFunctionArguments()
	args.Set("city", "Paris")
	call := ollama.ToolCall{}
	call.Function.Name, call.Function.Arguments = "get_weather", args
	msgs := []ollama.Message{{Role: "user", Content: "Weather in Paris?"}, {Role: "assistant", ToolCalls: []ollama.ToolCall{call}},
		{Role: "tool", ToolName: "get_weather", Content: `{"temp": 21}`}}
	prompt := func(tools ollama.Tools, msgs []ollama.Message) int {
		var n int
		err := c.Chat(ctx, &ollama.ChatRequest{Model: testModel, Messages: msgs, Tools: tools, Stream: &off, Options: map[string]any{"num_predict": 1}},
			func(r ollama.ChatResponse) error { n = r.PromptEvalCount; return nil })
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	bare := prompt(nil, msgs[:1])
	if withTools := prompt(tools, msgs[:1]); withTools <= bare+20 {
		t.Errorf("the tools added %d prompt tokens", withTools-bare)
	}
	if withCall := prompt(tools, msgs); withCall <= prompt(tools, msgs[:1])+10 {
		t.Errorf("the call and its result added %d prompt tokens", withCall-prompt(tools, msgs[:1]))
	}
}

func TestOllamaErrors(t *testing.T) {
	s := startServer(t, "", 1)
	for _, c := range []struct{ name, path, body, says string }{
		{"an image", "/api/chat", `{"model":"tiny","messages":[{"role":"user","content":"x","images":["aGk="]}]}`, "images are not supported"},
		{"options of the wrong type", "/api/chat", `{"model":"tiny","messages":[],"options":{"temperature":"hot"}}`, "temperature must be a number"},
		{"a bad format", "/api/chat", `{"model":"tiny","messages":[{"role":"user","content":"x"}],"format":"yaml"}`, `format must be "json" or a JSON schema`},
		{"a bad think", "/api/chat", `{"model":"tiny","messages":[],"think":5}`, "think must be"},
		{"context", "/api/generate", `{"model":"tiny","prompt":"x","context":[1,2]}`, "context is not supported"},
		{"suffix", "/api/generate", `{"model":"tiny","prompt":"x","suffix":"y"}`, "suffix is not supported"},
		{"a temperature out of range", "/api/generate", `{"model":"tiny","prompt":"x","options":{"temperature":9}}`, "temperature must be between"},
		{"trailing data", "/api/show", `{"model":"tiny"} x`, "one JSON object"},
		{"embed of numbers and text", "/api/embed", `{"model":"tiny","input":["a",1]}`, "input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, s, c.path, c.body)
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.status != 400 || !strings.Contains(e.Error, c.says) {
				t.Errorf("%d %s", r.status, r.body)
			}
		})
	}
}

// Every new route bounds its body and refuses it in its API's shape.
func TestNewRoutesBoundTheBody(t *testing.T) {
	load := serve.LoadOptions{ID: testModel, Slots: 1, Context: 384, Threads: 2, Backend: "cpu"}
	s := startServerOpts(t, serve.Options{MaxBody: 1024}, load, nil)
	big := `{"model":"tiny","input":"` + strings.Repeat("x", 2048) + `"}`
	for path, shape := range map[string]string{
		"/v1/messages": `"type":"request_too_large"`, "/v1/responses": `"code":"request_too_large"`, "/v1/embeddings": `"code":"request_too_large"`,
		"/api/chat": `{"error":"the request body is over 1024 bytes"}`, "/api/generate": `{"error":`, "/api/embed": `{"error":`,
	} {
		if r := post(t, s, path, big); r.status != 413 || !strings.Contains(r.body, shape) {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
	}
}
