package serve_test

import (
	"context"
	"path/filepath"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/serve"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// familyModel writes a synthetic tiny model of arch with its family's real
// tokenizer (cut) and chat template: Llama 3.2's for llama, Qwen2.5's for
// qwen2.
func familyModel(t testing.TB, arch string) *gguf.File {
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
	return f
}

// On a Llama 3.2-templated and a Qwen2.5-templated model the server's
// greedy reply is the engine's (the chat's and `bonsai run`'s).
func TestFamilyChatGreedyMatchesEngine(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) {
			f := familyModel(t, arch)
			s := startServerOn(t, f, serve.Options{}, serve.LoadOptions{ID: testModel, Slots: 1, Context: 384, Threads: 2, Batch: 64, Backend: "cpu"})
			resp, err := s.client().Chat.Completions.New(context.Background(), greedy(oai.SystemMessage("Be brief."), oai.UserMessage("Say hello")))
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Choices[0].Message.Content
			want := engineReply(t, f, []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Say hello"}}, 24)
			if got != want || got == "" {
				t.Errorf("server: %q\nengine: %q", got, want)
			}
		})
	}
}

// A tool call round trip in Llama 3.x's format (and Qwen2.5's): the
// required call is constrained to {"name": …, "parameters": {…}} of the
// tool's schema (<tool_call>{"name": …, "arguments": {…}}</tool_call>),
// comes back as an OpenAI tool call, and goes back into the conversation
// with its result (TestFamilyPromptIDs checks how the template writes
// them).
func TestLlama3ToolRoundTrip(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2"} {
		t.Run(arch, func(t *testing.T) { toolRoundTrip(t, arch) })
	}
}

func toolRoundTrip(t *testing.T, arch string) {
	f := familyModel(t, arch)
	s := startServerOn(t, f, serve.Options{}, serve.LoadOptions{ID: testModel, Slots: 1, Context: 1024, Threads: 2, Batch: 64, Backend: "cpu"})
	c := s.client()
	ctx := context.Background()
	p := oai.ChatCompletionNewParams{
		Model:      testModel,
		Messages:   []oai.ChatCompletionMessageParamUnion{oai.UserMessage("What is the weather in Paris?")},
		Tools:      []oai.ChatCompletionToolUnionParam{weatherTool},
		ToolChoice: oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("required")},
		MaxTokens:  oai.Int(120), Temperature: oai.Float(0.7), Seed: oai.Int(1),
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

	// Streamed, the same call.
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	var acc oai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if calls := acc.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Arguments != call.Function.Arguments {
		t.Errorf("streamed calls %+v, want %+v", calls, call)
	}

	next := p
	next.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("none")}
	next.Messages = append(next.Messages, ch.Message.ToParam(), oai.ToolMessage(`{"temp": 21}`, call.ID))
	r2, err := c.Chat.Completions.New(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	// tool_choice none: the template is given no tools, the reply is text.
	if n := len(r2.Choices[0].Message.ToolCalls); n != 0 || r2.Choices[0].FinishReason == "tool_calls" {
		t.Errorf("tool_choice none answered with %d calls", n)
	}
}
