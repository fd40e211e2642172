package serve_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func (s *testServer) anthropic() anthropic.Client {
	key := s.key
	if key == "" {
		key = "unused"
	}
	return anthropic.NewClient(aopt.WithoutEnvironmentDefaults(), aopt.WithBaseURL(s.root+"/"), aopt.WithAPIKey(key), aopt.WithMaxRetries(0))
}

// greedyReply is the greedy reply of /v1/chat/completions: what every other
// API must answer, being the same pipeline.
func greedyReply(t *testing.T, s *testServer, system, user string, maxTokens int64) string {
	t.Helper()
	msgs := []oai.ChatCompletionMessageParamUnion{oai.UserMessage(user)}
	if system != "" {
		msgs = append([]oai.ChatCompletionMessageParamUnion{oai.SystemMessage(system)}, msgs...)
	}
	p := greedy(msgs...)
	p.MaxTokens = oai.Int(maxTokens)
	resp, err := s.client().Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Choices[0].Message.Content
}

func TestAnthropicMessagesWithSDK(t *testing.T) {
	s := startServer(t, "secret", 2)
	c := s.anthropic()
	ctx := context.Background()
	want := greedyReply(t, s, "Be brief.", "Say hello", 24)
	params := anthropic.MessageNewParams{
		Model: testModel, MaxTokens: 24,
		System:   []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	}
	// The SDK has no temperature field any more (older clients send one).
	zero := aopt.WithJSONSet("temperature", 0)
	msg, err := c.Messages.New(ctx, params, zero)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != want || want == "" {
		t.Fatalf("content %+v, want the chat reply %q", msg.Content, want)
	}
	if msg.Role != "assistant" || !strings.HasPrefix(msg.ID, "msg_") || (msg.StopReason != "max_tokens" && msg.StopReason != "end_turn") {
		t.Errorf("message %+v", msg)
	}
	if msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 || (msg.StopReason == "max_tokens") != (msg.Usage.OutputTokens == 24) {
		t.Errorf("usage %+v, stop %q", msg.Usage, msg.StopReason)
	}

	// Streamed: message_start … message_stop, the same text.
	stream := c.Messages.NewStreaming(ctx, params, zero)
	var acc anthropic.Message
	var events []string
	for stream.Next() {
		ev := stream.Current()
		events = append(events, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(events) < 6 || events[0] != "message_start" || events[1] != "content_block_start" ||
		events[len(events)-3] != "content_block_stop" || events[len(events)-2] != "message_delta" || events[len(events)-1] != "message_stop" {
		t.Errorf("events %v", events)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != want || acc.StopReason != msg.StopReason || acc.Usage.OutputTokens != msg.Usage.OutputTokens {
		t.Errorf("streamed %+v (stop %q, usage %+v); whole %q", acc.Content, acc.StopReason, acc.Usage, want)
	}

	// A stop sequence ends the reply and is named.
	if len(want) > 4 {
		stop := want[2:4]
		p := params
		p.StopSequences = []string{stop}
		m, err := c.Messages.New(ctx, p, zero)
		if err != nil {
			t.Fatal(err)
		}
		if m.StopReason != "stop_sequence" || m.StopSequence != stop || strings.Contains(m.Content[0].Text, stop) || !strings.HasPrefix(want, m.Content[0].Text) {
			t.Errorf("stop sequence %q: %q, stop %q %q", stop, m.Content[0].Text, m.StopReason, m.StopSequence)
		}
	}

	count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: testModel,
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: params.System},
		Messages: params.Messages})
	if err != nil {
		t.Fatal(err)
	}
	if u := msg.Usage; count.InputTokens != u.InputTokens+u.CacheReadInputTokens {
		t.Errorf("count_tokens %d, the message's input %d + %d cached", count.InputTokens, u.InputTokens, u.CacheReadInputTokens)
	}
}

// A tool round trip: the forced tool's call comes back as a tool_use block
// whose input follows its input_schema, and its tool_result goes into the
// next request.
func TestAnthropicToolRoundTrip(t *testing.T) {
	s := startServer(t, "secret", 2)
	c := s.anthropic()
	ctx := context.Background()
	tool := anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("The weather in a city"),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{
				"city": map[string]any{"type": "string", "maxLength": 20},
				"unit": map[string]any{"enum": []string{"C", "F"}},
			},
			Required: []string{"city", "unit"},
		}}
	params := anthropic.MessageNewParams{
		Model: testModel, MaxTokens: 120,
		Messages:   []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))},
		Tools:      []anthropic.ToolUnionParam{{OfTool: &tool}},
		ToolChoice: anthropic.ToolChoiceParamOfTool("get_weather"),
	}
	sampled := []aopt.RequestOption{aopt.WithJSONSet("temperature", 0.7), aopt.WithJSONSet("seed", 1)}
	msg, err := c.Messages.New(ctx, params, sampled...)
	if err != nil {
		t.Fatal(err)
	}
	var use *anthropic.ContentBlockUnion
	for i := range msg.Content {
		if msg.Content[i].Type == "tool_use" {
			use = &msg.Content[i]
		}
	}
	if msg.StopReason != "tool_use" || use == nil || use.Name != "get_weather" || !strings.HasPrefix(use.ID, "toolu_") {
		t.Fatalf("stop %q, content %+v", msg.StopReason, msg.Content)
	}
	checkWeatherArgs(t, string(use.Input))

	// Streamed, the call's input arrives as input_json_delta.
	stream := c.Messages.NewStreaming(ctx, params, sampled...)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if n := len(acc.Content); n == 0 || acc.Content[n-1].Type != "tool_use" || acc.StopReason != "tool_use" {
		t.Fatalf("streamed %+v, stop %q", acc.Content, acc.StopReason)
	}
	checkWeatherArgs(t, string(acc.Content[len(acc.Content)-1].Input))

	next := params
	next.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
	next.Messages = append(next.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, `{"temp": 21}`, false)))
	reply, err := c.Messages.New(ctx, next, sampled...)
	if err != nil {
		t.Fatal(err)
	}
	if reply.StopReason == "tool_use" || len(reply.Content) == 0 || reply.Content[0].Type != "text" {
		t.Errorf("after the tool result: stop %q, content %+v", reply.StopReason, reply.Content)
	}
}

// Anthropic's errors come in its shape: {"type": "error", "error": {"type",
// "message"}}, the key read from x-api-key.
func TestAnthropicErrors(t *testing.T) {
	s := startServer(t, "secret", 1)
	for _, c := range []struct {
		name, key, body string
		status          int
		typ, says       string
	}{
		{"no key", "", `{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 401, "authentication_error", "API key"},
		{"wrong key", "nope", `{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 401, "authentication_error", "API key"},
		{"no max_tokens", "secret", `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "max_tokens is required"},
		{"no messages", "secret", `{"model":"tiny","max_tokens":5,"messages":[]}`, 400, "invalid_request_error", "messages must not be empty"},
		{"an image", "secret", `{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, 400, "invalid_request_error", `"image"`},
		{"a bad role", "secret", `{"model":"tiny","max_tokens":5,"messages":[{"role":"tool","content":"x"}]}`, 400, "invalid_request_error", "role must be"},
		{"content of a number", "secret", `{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":5}]}`, 400, "invalid_request_error", "content must be"},
		{"a server tool", "secret", `{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, 400, "invalid_request_error", "web_search_20250305"},
		{"bad tool_choice", "secret", `{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"maybe"}}`, 400, "invalid_request_error", "tool_choice"},
		{"trailing data", "secret", `{"model":"tiny","max_tokens":5,"messages":[]} {}`, 400, "invalid_request_error", "one JSON object"},
		{"temperature out of range", "secret", `{"model":"tiny","max_tokens":5,"temperature":7,"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", "temperature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := send(t, s, "POST", "/v1/messages", "", c.body, "x-api-key", c.key, "anthropic-version", "2023-06-01")
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != c.status || e.Type != "error" ||
				e.Error.Type != c.typ || !strings.Contains(e.Error.Message, c.says) {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
	}
}

// optionSeed sets the request's seed (llama-server's extension, which the
// Responses API lacks).
func optionSeed(seed int) option.RequestOption { return option.WithJSONSet("seed", seed) }
