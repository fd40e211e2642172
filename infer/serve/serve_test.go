package serve_test

import (
	"context"
	"encoding/json"
	"errors"

	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/serve"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

// testFile is a 2-layer Q1_0 model with the real Qwen3 tokenizer (the
// engine tests' model): random weights, real vocabulary and template.
func testFile(t testing.TB) *gguf.File {
	t.Helper()
	cfg := tinymodel.Config{Layers: 2, Embed: 128, Heads: 2, KVHeads: 1, HeadDim: 64, FFN: 256,
		Context: 1024, Type: gguf.Q1_0, Tied: true, Seed: 3, RopeBase: 1e6}
	cfg, err := tinymodel.WithQwenTokenizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := tinymodel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

type testServer struct {
	url   string // base URL, …/v1
	root  string
	model *serve.Model
	key   string
}

const testModel = "tiny"

func startServer(t testing.TB, key string, slots int) *testServer {
	t.Helper()
	return startServerWith(t, key, serve.LoadOptions{ID: testModel, Slots: slots, Context: 384, Threads: 2, Batch: 64, Backend: "cpu"})
}

// startServerWith is startServer loading the test model with o.
func startServerWith(t testing.TB, key string, o serve.LoadOptions) *testServer {
	t.Helper()
	return startServerOpts(t, serve.Options{APIKey: key}, o, nil)
}

// startServerOpts starts a server of so on the test model loaded with o;
// file, if set, changes the model's file first (its path, say).
func startServerOpts(t testing.TB, so serve.Options, o serve.LoadOptions, file func(*gguf.File)) *testServer {
	t.Helper()
	f := testFile(t)
	if file != nil {
		file(f)
	}
	return startServerOn(t, f, so, o)
}

// startServerOn starts a server of so on f loaded with o; it closes f at
// the end of the test.
func startServerOn(t testing.TB, f *gguf.File, so serve.Options, o serve.LoadOptions) *testServer {
	t.Helper()
	key := so.APIKey
	m, err := serve.LoadFile(f, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve.New(so)
	srv.SetModel(m)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() {
		hs.Close()
		m.Close()
		f.Close()
	})
	root := "http://" + ln.Addr().String()
	return &testServer{url: root + "/v1", root: root, model: m, key: key}
}

func (s *testServer) client(opts ...option.RequestOption) *oai.Client {
	base := []option.RequestOption{option.WithBaseURL(s.url + "/"), option.WithMaxRetries(0), option.WithAPIKey(s.key)}
	if s.key == "" {
		base[2] = option.WithAPIKey("unused")
	}
	c := oai.NewClient(append(base, opts...)...)
	return &c
}

func greedy(msgs ...oai.ChatCompletionMessageParamUnion) oai.ChatCompletionNewParams {
	return oai.ChatCompletionNewParams{Model: testModel, Messages: msgs, Temperature: oai.Float(0), MaxTokens: oai.Int(24)}
}

// engineReply is what the chat's engine (and `bonsai run`) answers
// greedily: the reference the server must reproduce token for token.
func engineReply(t *testing.T, f *gguf.File, msgs []chat.Message, maxTokens int) string {
	t.Helper()
	return engineSampled(t, f, msgs, maxTokens, engine.Sampling{Temperature: 0, RepeatPenalty: 1})
}

// engineSampled is engineReply with the sampling given.
func engineSampled(t *testing.T, f *gguf.File, msgs []chat.Message, maxTokens int, s engine.Sampling) string {
	t.Helper()
	return engineSampledOn(t, f, "cpu", msgs, maxTokens, s)
}

// engineSampledOn is engineSampled on backend (a software GPU admitted).
func engineSampledOn(t *testing.T, f *gguf.File, backend string, msgs []chat.Message, maxTokens int, s engine.Sampling) string {
	t.Helper()
	e := engine.New(engine.Options{File: f, Backend: backend, GPU: infer.GPUOptions{AllowSoftware: true}, Threads: 2, Context: 384})
	defer e.Close()
	e.Generate(engine.GenerateRequest{Messages: msgs, MaxTokens: maxTokens, Sampling: &s})
	var text strings.Builder
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev := <-e.Events():
			switch ev := ev.(type) {
			case engine.Token:
				text.WriteString(ev.Text)
			case engine.Done:
				return text.String()
			case engine.Error:
				t.Fatal(ev.Err)
			}
		case <-timeout:
			t.Fatal("the engine did not answer")
		}
	}
}

func TestChatGreedyMatchesEngine(t *testing.T) {
	s := startServer(t, "", 2)
	c := s.client()
	ctx := context.Background()
	resp, err := c.Chat.Completions.New(ctx, greedy(oai.SystemMessage("Be brief."), oai.UserMessage("Say hello")))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("%d choices", len(resp.Choices))
	}
	got := resp.Choices[0].Message.Content
	want := engineReply(t, testFile(t), []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Say hello"}}, 24)
	if got != want || got == "" {
		t.Errorf("server: %q\nengine: %q", got, want)
	}
	if resp.Usage.CompletionTokens == 0 || resp.Usage.PromptTokens == 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Errorf("usage %+v", resp.Usage)
	}
	if r := resp.Choices[0].FinishReason; r != "length" && r != "stop" {
		t.Errorf("finish reason %q", r)
	}
	// A seed makes sampling repeatable.
	p := greedy(oai.UserMessage("Tell me a story"))
	p.Temperature, p.Seed = oai.Float(1), oai.Int(42)
	a, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if a.Choices[0].Message.Content != b.Choices[0].Message.Content {
		t.Errorf("seed 42 twice: %q and %q", a.Choices[0].Message.Content, b.Choices[0].Message.Content)
	}
}

// Several requests decoded together in one batch give each the reply it
// gets alone.
func TestConcurrentRequestsMatchAlone(t *testing.T) {
	s := startServer(t, "", 4)
	c := s.client()
	ctx := context.Background()
	prompts := []string{"One", "Two words", "A longer prompt of several words", "Four"}
	alone := make([]string, len(prompts))
	for i, p := range prompts {
		r, err := c.Chat.Completions.New(ctx, greedy(oai.UserMessage(p)))
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = r.Choices[0].Message.Content
	}
	// Different prompts so the cache does not make it trivial: the slots
	// hold the earlier conversations, the new prompts differ from them.
	together := make([]string, len(prompts))
	var wg sync.WaitGroup
	errs := make(chan error, len(prompts))
	for i, p := range prompts {
		wg.Go(func() {
			r, err := c.Chat.Completions.New(ctx, greedy(oai.SystemMessage("x"), oai.UserMessage(p)))
			if err != nil {
				errs <- err
				return
			}
			together[i] = r.Choices[0].Message.Content
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, p := range prompts {
		r, err := c.Chat.Completions.New(ctx, greedy(oai.SystemMessage("x"), oai.UserMessage(p)))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Choices[0].Message.Content; got != together[i] {
			t.Errorf("%q: alone %q, batched %q", p, got, together[i])
		}
	}
	_ = alone
}

func TestStreamingAndUsage(t *testing.T) {
	s := startServer(t, "", 2)
	c := s.client()
	ctx := context.Background()
	whole, err := c.Chat.Completions.New(ctx, greedy(oai.UserMessage("Stream this")))
	if err != nil {
		t.Fatal(err)
	}
	p := greedy(oai.UserMessage("Stream this"))
	p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	var acc oai.ChatCompletionAccumulator
	chunks, usageChunks := 0, 0
	var finish string
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		chunks++
		if len(ch.Choices) == 0 {
			usageChunks++
			if ch.Usage.CompletionTokens == 0 {
				t.Errorf("usage chunk without usage: %+v", ch.Usage)
			}
		} else if ch.Choices[0].FinishReason != "" {
			finish = ch.Choices[0].FinishReason
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := acc.Choices[0].Message.Content, whole.Choices[0].Message.Content; got != want {
		t.Errorf("streamed %q, whole %q", got, want)
	}
	if chunks < 4 || usageChunks != 1 || finish == "" {
		t.Errorf("%d chunks, %d usage chunks, finish %q", chunks, usageChunks, finish)
	}
	if acc.Usage.CompletionTokens != whole.Usage.CompletionTokens {
		t.Errorf("streamed usage %+v, whole %+v", acc.Usage, whole.Usage)
	}

	// Without include_usage no usage chunk comes, and the stream still
	// ends with [DONE] (checked on the raw stream).
	raw := post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`)
	if !strings.HasSuffix(raw.body, "data: [DONE]\n\n") || strings.Contains(raw.body, `"usage"`) {
		t.Errorf("raw stream:\n%s", raw.body)
	}
}

func TestStopSequences(t *testing.T) {
	s := startServer(t, "", 1)
	c := s.client()
	ctx := context.Background()
	var p oai.ChatCompletionNewParams
	var text string
	for _, prompt := range []string{"Say hello", "Count for me", "Tell me a story", "Why?"} {
		p = greedy(oai.UserMessage(prompt))
		p.MaxTokens = oai.Int(40)
		full, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if text = full.Choices[0].Message.Content; len(text) >= 12 {
			break
		}
	}
	if len(text) < 12 {
		t.Fatalf("no reply long enough to cut: %q", text)
	}
	stop := text[len(text)/2 : len(text)/2+3]
	want := text[:strings.Index(text, stop)]
	p.Stop = oai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"\x00never", stop}}
	cut, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := cut.Choices[0].Message.Content; got != want || cut.Choices[0].FinishReason != "stop" {
		t.Errorf("stop %q: %q (%s), want %q", stop, got, cut.Choices[0].FinishReason, want)
	}
	// Streamed, the stop string is held back as it forms.
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	var acc oai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != want {
		t.Errorf("streamed with stop %q: %q, want %q", stop, got, want)
	}
}

var weatherTool = oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: oai.String("The weather in a city"),
	Parameters: shared.FunctionParameters{
		"type": "object",
		"properties": map[string]any{
			"city": map[string]any{"type": "string", "maxLength": 20},
			"unit": map[string]any{"enum": []string{"C", "F"}},
		},
		"required": []string{"city", "unit"},
	},
})

func checkWeatherArgs(t *testing.T, args string) {
	t.Helper()
	var a struct {
		City *string `json:"city"`
		Unit *string `json:"unit"`
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatalf("arguments %q: %v", args, err)
	}
	if a.City == nil || a.Unit == nil || (*a.Unit != "C" && *a.Unit != "F") || len([]rune(*a.City)) > 20 {
		t.Fatalf("arguments %q do not fit the schema", args)
	}
}

func TestToolCalls(t *testing.T) {
	s := startServer(t, "", 2)
	c := s.client()
	ctx := context.Background()
	p := oai.ChatCompletionNewParams{
		Model:    testModel,
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("What is the weather in Paris?")},
		Tools:    []oai.ChatCompletionToolUnionParam{weatherTool},
		ToolChoice: oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{
			Name: "get_weather"}),
		MaxTokens: oai.Int(120), Temperature: oai.Float(0.7), Seed: oai.Int(1),
	}
	resp, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("finish %q, tool calls %+v, content %q", ch.FinishReason, ch.Message.ToolCalls, ch.Message.Content)
	}
	call := ch.Message.ToolCalls[0]
	if call.Function.Name != "get_weather" || call.ID == "" {
		t.Errorf("call %+v", call)
	}
	checkWeatherArgs(t, call.Function.Arguments)

	// Streamed: the call arrives as a tool-call delta.
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	var acc oai.ChatCompletionAccumulator
	finished := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished++
			checkWeatherArgs(t, tc.Arguments)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if calls := acc.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Arguments != call.Function.Arguments {
		t.Errorf("streamed calls %+v, want %+v", calls, call)
	}

	// The call and its result go back into the conversation: the template
	// renders both, and the server answers.
	next := p
	next.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("none")}
	next.Messages = append(next.Messages, ch.Message.ToParam(), oai.ToolMessage(`{"temp": 21}`, call.ID))
	if _, err := c.Chat.Completions.New(ctx, next); err != nil {
		t.Fatal(err)
	}
}

func TestJSONSchemaAlwaysSatisfied(t *testing.T) {
	s := startServer(t, "", 4)
	c := s.client()
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":  map[string]any{"type": "string", "minLength": 1, "maxLength": 12},
			"age":   map[string]any{"type": "integer"},
			"happy": map[string]any{"type": "boolean"},
			"pets":  map[string]any{"type": "array", "items": map[string]any{"enum": []string{"cat", "dog"}}, "maxItems": 3},
		},
		"required": []string{"name", "age", "pets"},
	}
	var wg sync.WaitGroup
	for seed := range 6 {
		wg.Go(func() {
			p := oai.ChatCompletionNewParams{
				Model:    testModel,
				Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Describe a person as JSON")},
				ResponseFormat: oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
					JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema}}},
				Temperature: oai.Float(1), Seed: oai.Int(int64(seed)), MaxTokens: oai.Int(300),
			}
			resp, err := c.Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Error(err)
				return
			}
			text := resp.Choices[0].Message.Content
			var v struct {
				Name  *string  `json:"name"`
				Age   *float64 `json:"age"`
				Happy *bool    `json:"happy"`
				Pets  []string `json:"pets"`
			}
			dec := json.NewDecoder(strings.NewReader(text))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&v); err != nil || resp.Choices[0].FinishReason != "stop" {
				t.Errorf("seed %d: %q (%s): %v", seed, text, resp.Choices[0].FinishReason, err)
				return
			}
			if v.Name == nil || *v.Name == "" || len([]rune(*v.Name)) > 12 || v.Age == nil || *v.Age != float64(int64(*v.Age)) || v.Pets == nil || len(v.Pets) > 3 {
				t.Errorf("seed %d: %q does not validate", seed, text)
			}
			for _, pet := range v.Pets {
				if pet != "cat" && pet != "dog" {
					t.Errorf("seed %d: pet %q", seed, pet)
				}
			}
		})
	}
	wg.Wait()
	// json_object: any object.
	p := greedy(oai.UserMessage("JSON please"))
	p.MaxTokens = oai.Int(200)
	p.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	resp, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if text := resp.Choices[0].Message.Content; resp.Choices[0].FinishReason == "stop" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			t.Errorf("json_object: %q: %v", text, err)
		}
	} else if !strings.HasPrefix(text, "{") {
		t.Errorf("json_object cut at the limit does not start an object: %q", text)
	}
	// A schema the recognizer cannot enforce is refused, naming the keyword, not ignored.
	bad := post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer","multipleOf":3}}}}`)
	if bad.status != 400 || !strings.Contains(bad.body, "unsupported_schema") || !strings.Contains(bad.body, "multipleOf") {
		t.Errorf("multipleOf schema: %d %s", bad.status, bad.body)
	}
}

func TestLogprobs(t *testing.T) {
	s := startServer(t, "", 1)
	c := s.client()
	p := greedy(oai.UserMessage("Logprobs"))
	p.Logprobs, p.TopLogprobs, p.MaxTokens = oai.Bool(true), oai.Int(3), oai.Int(8)
	resp, err := c.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	lps := resp.Choices[0].Logprobs.Content
	var text strings.Builder
	for i, lp := range lps {
		text.WriteString(lp.Token)
		if lp.Logprob > 0 || len(lp.TopLogprobs) != 3 {
			t.Fatalf("token %d: %+v", i, lp)
		}
		// Greedy: the sampled token is the most likely one.
		if lp.TopLogprobs[0].Token != lp.Token || lp.TopLogprobs[0].Logprob != lp.Logprob {
			t.Errorf("token %d %q (%v): top %q (%v)", i, lp.Token, lp.Logprob, lp.TopLogprobs[0].Token, lp.TopLogprobs[0].Logprob)
		}
		for j := 1; j < 3; j++ {
			if lp.TopLogprobs[j].Logprob > lp.TopLogprobs[j-1].Logprob {
				t.Errorf("token %d: top logprobs out of order", i)
			}
		}
	}
	if got := resp.Choices[0].Message.Content; text.String() != got {
		t.Errorf("logprob tokens spell %q, the content is %q", text.String(), got)
	}
}

func TestCompletions(t *testing.T) {
	s := startServer(t, "", 1)
	c := s.client()
	resp, err := c.Completions.New(context.Background(), oai.CompletionNewParams{
		Model:     oai.CompletionNewParamsModel(testModel),
		Prompt:    oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon a time")},
		MaxTokens: oai.Int(10), Temperature: oai.Float(0), Logprobs: oai.Int(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.Text == "" || ch.FinishReason != "length" || len(ch.Logprobs.Tokens) != 10 || resp.Usage.CompletionTokens != 10 {
		t.Errorf("completion %+v, usage %+v", ch, resp.Usage)
	}
	stream := c.Completions.NewStreaming(context.Background(), oai.CompletionNewParams{
		Model:     oai.CompletionNewParamsModel(testModel),
		Prompt:    oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon a time")},
		MaxTokens: oai.Int(10), Temperature: oai.Float(0),
	})
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Text)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != ch.Text {
		t.Errorf("streamed %q, whole %q", text.String(), ch.Text)
	}
}

func TestAuth(t *testing.T) {
	s := startServer(t, "sekrit", 1)
	ctx := context.Background()
	if _, err := s.client().Chat.Completions.New(ctx, greedy(oai.UserMessage("hi"))); err != nil {
		t.Fatalf("with the key: %v", err)
	}
	_, err := s.client(option.WithAPIKey("wrong")).Chat.Completions.New(ctx, greedy(oai.UserMessage("hi")))
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type != "authentication_error" {
		t.Errorf("a wrong key: %v", err)
	}
	for _, path := range []string{"/v1/models", "/metrics", "/tokenize"} {
		if r := get(t, s, path, ""); r.status != 401 {
			t.Errorf("%s without a key: %d", path, r.status)
		}
	}
	if r := get(t, s, "/health", ""); r.status != 200 {
		t.Errorf("/health without a key: %d", r.status)
	}
	if r := get(t, s, "/v1/models", "sekrit"); r.status != 200 || !strings.Contains(r.body, `"n_ctx":384`) {
		t.Errorf("/v1/models: %d %s", r.status, r.body)
	}
}

func TestBadRequests(t *testing.T) {
	s := startServer(t, "", 1)
	for _, c := range []struct {
		body  string
		param string
	}{
		{`{"messages":[{"role":"user","content":"x"}],"temperature":5}`, "temperature"},
		{`{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, "temperature"},
		{`{"messages":[]}`, "messages"},
		{`{"messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"user","content":"x"}],"n":9}`, "n"},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":-2}`, "max_tokens"},
		{`{"messages":[{"role":"user","content":"x"}],"logit_bias":{"7":101}}`, "logit_bias"},
		{`{"messages":[{"role":"user","content":"x"}],"logit_bias":{"99999999":1}}`, "logit_bias"},
		{`{"messages":[{"role":"user","content":"x"}],"grammar":"root ::= \"a\""}`, "grammar"},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":0}`, "max_tokens"},
		{`{"messages":[{"role":"user","content":"x"}],"top_logprobs":3}`, "top_logprobs"},
		{`{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`, "tool_choice"},
		{`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}}`, "response_format.type"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, ""},
		{`{"messages":`, ""},
		{`{"messages":[{"role":"user","content":"x"}]} trailing`, ""},
		{`{"messages":[{"role":"user","content":"x"}]}{"messages":[]}`, ""},
		{`{"messages":[{"role":"user","content":"x"}]}]`, ""},
	} {
		r := post(t, s, "/v1/chat/completions", c.body)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.status != 400 || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
			t.Errorf("%s: %d %s", c.body, r.status, r.body)
			continue
		}
		if c.param != "" && (e.Error.Param == nil || *e.Error.Param != c.param) {
			t.Errorf("%s: param %v, want %s", c.body, e.Error.Param, c.param)
		}
	}
	// Unknown fields are ignored.
	if r := post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"frobnicate":{"a":1},"user":"me"}`); r.status != 200 {
		t.Errorf("unknown fields: %d %s", r.status, r.body)
	}
	if r := post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"`+strings.Repeat("x", serve.DefaultMaxBody)+`"}]}`); r.status != 413 {
		t.Errorf("an oversized body: %d", r.status)
	}
	long := strings.Repeat("word ", 500)
	if r := post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"`+long+`"}]}`); r.status != 400 || !strings.Contains(r.body, "context_length_exceeded") {
		t.Errorf("a prompt over the context: %d %s", r.status, r.body)
	}
}

func TestTokenize(t *testing.T) {
	s := startServer(t, "", 1)
	r := post(t, s, "/tokenize", `{"content":"Hello world"}`)
	var tok struct {
		Tokens []int32 `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(r.body), &tok); err != nil || len(tok.Tokens) == 0 {
		t.Fatalf("tokenize: %d %s", r.status, r.body)
	}
	b, _ := json.Marshal(map[string]any{"tokens": tok.Tokens})
	r = post(t, s, "/detokenize", string(b))
	if !strings.Contains(r.body, `"content":"Hello world"`) {
		t.Errorf("detokenize: %s", r.body)
	}
	if r := post(t, s, "/detokenize", `{"tokens":[-1]}`); r.status != 400 {
		t.Errorf("detokenize of -1: %d", r.status)
	}
}

func TestHealthWhileLoading(t *testing.T) {
	srv := serve.New(serve.Options{APIKey: "k"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	s := &testServer{root: "http://" + ln.Addr().String()}
	if r := get(t, s, "/health", ""); r.status != 503 {
		t.Errorf("/health while loading: %d", r.status)
	}
	if r := post(t, s, "/v1/chat/completions", `{}`); r.status != 401 {
		t.Errorf("chat without a key while loading: %d", r.status)
	}
}

// A client that goes away mid-reply frees its slot: with one slot, the
// next request is answered at once.
func TestDisconnectFreesSlot(t *testing.T) {
	s := startServer(t, "", 1)
	c := s.client()
	ctx, cancel := context.WithCancel(context.Background())
	p := greedy(oai.UserMessage("Go on and on"))
	p.MaxTokens = oai.Int(5000)
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	for i := 0; i < 3 && stream.Next(); i++ {
	}
	cancel()
	stream.Close()
	waitIdle(t, s)
	qctx, qcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer qcancel()
	if _, err := c.Chat.Completions.New(qctx, greedy(oai.UserMessage("Next"))); err != nil {
		t.Fatal(err)
	}
	if st := s.model.Sched.Stats(); st.Busy != 0 || st.Queued != 0 {
		t.Errorf("stats after: %+v", st)
	}
}

func waitIdle(t testing.TB, s *testServer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := s.model.Sched.Stats()
		if st.Busy == 0 && st.Queued == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots still busy: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMetricsAndPromptCache(t *testing.T) {
	s := startServer(t, "", 2)
	c := s.client()
	ctx := context.Background()
	first, err := c.Chat.Completions.New(ctx, greedy(oai.UserMessage("First turn")))
	if err != nil {
		t.Fatal(err)
	}
	// The next turn extends the conversation: its prefix is cached.
	msgs := []oai.ChatCompletionMessageParamUnion{oai.UserMessage("First turn"), first.Choices[0].Message.ToParam(), oai.UserMessage("Second")}
	second, err := c.Chat.Completions.New(ctx, greedy(msgs...))
	if err != nil {
		t.Fatal(err)
	}
	// What the cache can keep: the tokens the two prompts share. (Qwen3's
	// template writes an earlier reply without the empty think block the
	// generation prompt had, so they part at that reply.)
	enc := func(msgs ...chat.Message) []int32 { return s.model.Tmpl.Encode(msgs, true, false, s.model.Tok.Encode) }
	a := enc(chat.Message{Role: "user", Content: "First turn"})
	b := enc(chat.Message{Role: "user", Content: "First turn"}, chat.Message{Role: "assistant", Content: first.Choices[0].Message.Content},
		chat.Message{Role: "user", Content: "Second"})
	shared := 0
	for shared < len(a) && a[shared] == b[shared] {
		shared++
	}
	if cached := second.Usage.PromptTokensDetails.CachedTokens; int(cached) != shared || shared < 5 {
		t.Errorf("the second turn reused %d tokens, the prompts share %d", cached, shared)
	}
	post(t, s, "/v1/chat/completions", `{"messages":[]}`)
	m := get(t, s, "/metrics", "").body
	for _, want := range []string{
		`bonsai_http_requests_total{route="/v1/chat/completions",code="200"} 2`,
		`bonsai_http_requests_total{route="/v1/chat/completions",code="400"} 1`,
		"bonsai_slots 2", "bonsai_slots_busy 0", "bonsai_queue_depth 0", "bonsai_generations_total 2",
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	gen := metricValue(t, m, "bonsai_generated_tokens_total")
	if want := first.Usage.CompletionTokens + second.Usage.CompletionTokens; int(gen) != int(want) {
		t.Errorf("generated tokens %v, the replies had %d", gen, want)
	}
	for _, name := range []string{"bonsai_decode_tokens_per_second", "bonsai_prompt_tokens_per_second", "bonsai_prompt_tokens_cached_total"} {
		if metricValue(t, m, name) <= 0 {
			t.Errorf("%s is not positive", name)
		}
	}
}

func metricValue(t testing.TB, text, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s in the metrics", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type answer struct {
	status int
	body   string
}

func post(t testing.TB, s *testServer, path, body string) answer {
	return do(t, s, http.MethodPost, path, body, s.key)
}

func get(t testing.TB, s *testServer, path, key string) answer {
	return do(t, s, http.MethodGet, path, "", key)
}

func do(t testing.TB, s *testServer, method, path, body, key string) answer {
	t.Helper()
	req, err := http.NewRequest(method, s.root+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

// With prompt lookup on, a reply that quotes its prompt is the same reply
// (the server's tokens are plain decoding's), its drafts show in the
// timings and the metrics, and several requests at once keep their own.
func TestSpeculationKeepsReplies(t *testing.T) {
	spc := startServerWith(t, "", serve.LoadOptions{ID: testModel, Slots: 3, Context: 384, Threads: 2, Batch: 64, Backend: "cpu",
		Spec: spec.Options{Mode: spec.NGram}})
	plain := startServer(t, "", 3)
	if spc.model.Spec != spec.NGram {
		t.Fatalf("speculation %q", spc.model.Spec)
	}

	passage := "the cat sat on the mat and the dog sat on the log and the cat sat on the mat again"
	prompts := []string{"Repeat: " + passage, "Say " + passage + " twice", "Hello there", "Copy: " + passage + " " + passage}
	replies := func(s *testServer) []map[string]any {
		out := make([]map[string]any, len(prompts))
		var wg sync.WaitGroup
		for i, p := range prompts {
			wg.Go(func() {
				body := `{"messages":[{"role":"user","content":` + strconv.Quote(p) + `}],"temperature":0,"max_tokens":48}`
				r := post(t, s, "/v1/chat/completions", body)
				if r.status != http.StatusOK {
					t.Errorf("prompt %d: %d %s", i, r.status, r.body)
					return
				}
				var v map[string]any
				if err := json.Unmarshal([]byte(r.body), &v); err != nil {
					t.Error(err)
				}
				out[i] = v
			})
		}
		wg.Wait()
		return out
	}
	content := func(v map[string]any) string {
		return v["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	}
	want, got := replies(plain), replies(spc)
	if t.Failed() {
		return
	}
	drafted, accepted := 0.0, 0.0
	for i := range prompts {
		if content(got[i]) != content(want[i]) {
			t.Errorf("prompt %d with lookup: %q\nwithout: %q", i, content(got[i]), content(want[i]))
		}
		tm := got[i]["timings"].(map[string]any)
		d, _ := tm["draft_n"].(float64)
		a, _ := tm["draft_n_accepted"].(float64)
		drafted, accepted = drafted+d, accepted+a
		if _, ok := want[i]["timings"].(map[string]any)["draft_n"]; ok {
			t.Errorf("prompt %d: the plain server reports drafts", i)
		}
	}
	t.Logf("%v of %v drafts accepted", accepted, drafted)
	if drafted == 0 || accepted == 0 {
		t.Errorf("%v of %v drafts accepted: speculation did not run", accepted, drafted)
	}
	mt := get(t, spc, "/metrics", "").body
	if metricValue(t, mt, "bonsai_draft_tokens_total") != drafted || metricValue(t, mt, "bonsai_draft_tokens_accepted_total") != accepted {
		t.Errorf("metrics disagree with the timings' %v/%v:\n%s", accepted, drafted, mt)
	}
}
