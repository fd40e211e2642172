package serve_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/serve"
)

var timeTool = oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name: "get_time",
	Parameters: shared.FunctionParameters{
		"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string", "maxLength": 12}},
		"required": []string{"zone"},
	},
})

// familyToolFile is a synthetic model of each family with its own chat
// template: Llama 3.2's and Qwen2.5's on their BPE vocabularies, Mistral
// Nemo's and Gemma 3's on SentencePiece ones with their control tokens.
func familyToolFile(t *testing.T, family string) *gguf.File {
	switch family {
	case "mistral", "mistral-v11", "gemma3":
		return serve.SPMFamilyFile(t, family)
	}
	return familyModel(t, family)
}

// For each family, through the official Go client on a loopback server: a
// required call and a call of a named function, decoded under the
// family's tool-call grammar, come back as OpenAI tool calls (whole and
// streamed alike) of that function with arguments that fit its schema, and
// the conversation with the call and its result goes back to the model
// through the family's template (Mistral's refuses ids that are not 9
// letters and digits; Gemma's refuses turns that do not alternate).
func TestFamilyToolCallsConstrained(t *testing.T) {
	for _, family := range []string{"llama", "qwen2", "mistral", "mistral-v11", "gemma3"} {
		t.Run(family, func(t *testing.T) {
			f := familyToolFile(t, family)
			s := startServerOn(t, f, serve.Options{}, serve.LoadOptions{ID: testModel, Slots: 1, Context: 2048, Threads: 2, Batch: 64, Backend: "cpu"})
			c := s.client()
			ctx := context.Background()
			for _, choice := range []struct {
				name string
				tc   oai.ChatCompletionToolChoiceOptionUnionParam
				want string
			}{
				{"required", oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("required")}, ""},
				{"named", oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"}), "get_time"},
			} {
				p := oai.ChatCompletionNewParams{
					Model:      testModel,
					Messages:   []oai.ChatCompletionMessageParamUnion{oai.SystemMessage("Be brief."), oai.UserMessage("What is the weather in Paris?")},
					Tools:      []oai.ChatCompletionToolUnionParam{weatherTool, timeTool},
					ToolChoice: choice.tc,
					MaxTokens:  oai.Int(240), Temperature: oai.Float(0.7), Seed: oai.Int(3),
				}
				resp, err := c.Chat.Completions.New(ctx, p)
				if err != nil {
					t.Fatalf("%s: %v", choice.name, err)
				}
				ch := resp.Choices[0]
				if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
					t.Fatalf("%s: finish %q, tool calls %+v, content %q", choice.name, ch.FinishReason, ch.Message.ToolCalls, ch.Message.Content)
				}
				call := ch.Message.ToolCalls[0]
				switch name := call.Function.Name; {
				case choice.want != "" && name != choice.want:
					t.Fatalf("%s: called %q", choice.name, name)
				case name == "get_weather":
					checkWeatherArgs(t, call.Function.Arguments)
				case name == "get_time":
					checkTimeArgs(t, call.Function.Arguments)
				default:
					t.Fatalf("%s: called %q", choice.name, name)
				}
				if strings.HasPrefix(family, "mistral") && (len(call.ID) != 9 || strings.Trim(call.ID, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "") {
					t.Errorf("Mistral call id %q is not 9 letters and digits", call.ID)
				}

				stream := c.Chat.Completions.NewStreaming(ctx, p)
				var acc oai.ChatCompletionAccumulator
				for stream.Next() {
					acc.AddChunk(stream.Current())
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				if calls := acc.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Name != call.Function.Name ||
					calls[0].Function.Arguments != call.Function.Arguments {
					t.Errorf("%s: streamed calls %+v, want %+v", choice.name, calls, call)
				}

				next := p
				next.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("auto")}
				next.Messages = append(next.Messages, ch.Message.ToParam(), oai.ToolMessage(`{"result": 21}`, call.ID))
				next.MaxTokens = oai.Int(8)
				if _, err := c.Chat.Completions.New(ctx, next); err != nil {
					t.Fatalf("%s: the result's turn: %v", choice.name, err)
				}
				// A client's own ids (another server's) are taken too.
				other := ch.Message.ToParam()
				other.OfAssistant.ToolCalls[0].OfFunction.ID = "call_from_elsewhere_01"
				next.Messages = append(p.Messages, other, oai.ToolMessage(`{"result": 21}`, "call_from_elsewhere_01"))
				if _, err := c.Chat.Completions.New(ctx, next); err != nil {
					t.Fatalf("%s: the result's turn with a client's id: %v", choice.name, err)
				}
			}
		})
	}
}

func checkTimeArgs(t *testing.T, args string) {
	t.Helper()
	var a struct {
		Zone *string `json:"zone"`
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil || a.Zone == nil || len([]rune(*a.Zone)) > 12 {
		t.Fatalf("arguments %q do not fit the schema (%v)", args, err)
	}
}

// Mistral's [TOOL_CALLS] is a control token: under a required call's
// grammar the model may write it as that token (here made its first
// choice by a logit bias), as its training has it, not only spelled out in
// characters.
func TestMistralToolCallsControlToken(t *testing.T) {
	f := serve.SPMFamilyFile(t, "mistral")
	tokens, _ := f.KV.Strings("tokenizer.ggml.tokens")
	id := -1
	for i, tok := range tokens {
		if tok == "[TOOL_CALLS]" {
			id = i
		}
	}
	s := startServerOn(t, f, serve.Options{}, serve.LoadOptions{ID: testModel, Slots: 1, Context: 2048, Threads: 2, Batch: 64, Backend: "cpu"})
	p := oai.ChatCompletionNewParams{
		Model:      testModel,
		Messages:   []oai.ChatCompletionMessageParamUnion{oai.UserMessage("What is the weather in Paris?")},
		Tools:      []oai.ChatCompletionToolUnionParam{weatherTool},
		ToolChoice: oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("required")},
		LogitBias:  map[string]int64{strconv.Itoa(id): 100},
		Logprobs:   oai.Bool(true),
		MaxTokens:  oai.Int(240), Temperature: oai.Float(0),
	}
	resp, err := s.client().Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if lps := ch.Logprobs.Content; len(lps) == 0 || lps[0].Token != "[TOOL_CALLS]" {
		t.Fatalf("first token %+v, want the [TOOL_CALLS] token", lps[:min(len(lps), 1)])
	}
	// Once in the call, the token's bias no longer counts: the JSON goes on.
	if len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get_weather" {
		t.Fatalf("tool calls %+v, content %q", ch.Message.ToolCalls, ch.Message.Content)
	}
	checkWeatherArgs(t, ch.Message.ToolCalls[0].Function.Arguments)
}

// Through the Anthropic and Responses clients, on the families whose
// templates hold ids to a shape (Mistral's 9 letters and digits) or write
// no tools (Gemma 3): a required call comes back as the API's own call
// item, and its result, sent back under the API's id ("toolu_…",
// Responses' call_id), goes through the template.
func TestFamilyToolsOtherAPIs(t *testing.T) {
	for _, family := range []string{"mistral", "mistral-v11", "gemma3"} {
		t.Run(family, func(t *testing.T) {
			f := familyToolFile(t, family)
			s := startServerOn(t, f, serve.Options{}, serve.LoadOptions{ID: testModel, Slots: 1, Context: 2048, Threads: 2, Batch: 64, Backend: "cpu"})
			ctx := context.Background()

			tool := anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{
				Properties: map[string]any{"city": map[string]any{"type": "string", "maxLength": 20}, "unit": map[string]any{"enum": []string{"C", "F"}}},
				Required:   []string{"city", "unit"},
			}}
			params := anthropic.MessageNewParams{
				// Room for a random model's whitespace between the JSON's tokens.
				Model: testModel, MaxTokens: 240,
				Messages:   []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))},
				Tools:      []anthropic.ToolUnionParam{{OfTool: &tool}},
				ToolChoice: anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}},
			}
			ac := s.anthropic()
			msg, err := ac.Messages.New(ctx, params, aopt.WithJSONSet("temperature", 0.7), aopt.WithJSONSet("seed", 2))
			if err != nil {
				t.Fatal(err)
			}
			var use *anthropic.ContentBlockUnion
			for i := range msg.Content {
				if msg.Content[i].Type == "tool_use" {
					use = &msg.Content[i]
				}
			}
			if use == nil || use.Name != "get_weather" {
				t.Fatalf("stop %q, content %+v", msg.StopReason, msg.Content)
			}
			checkWeatherArgs(t, string(use.Input))
			next := params
			next.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}
			next.MaxTokens = 8
			next.Messages = append(next.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, `{"temp": 21}`, false)))
			if _, err := ac.Messages.New(ctx, next); err != nil {
				t.Fatalf("Anthropic, the result's turn: %v", err)
			}

			rp := responses.ResponseNewParams{
				Model: testModel, MaxOutputTokens: oai.Int(240), Temperature: oai.Float(0.7),
				Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("What is the weather in Paris?")},
				Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Strict: oai.Bool(true),
					Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 20},
						"unit": map[string]any{"enum": []string{"C", "F"}}}, "required": []string{"city", "unit"}}}}},
				ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oai.Opt(responses.ToolChoiceOptionsRequired)},
			}
			oc := s.client()
			resp, err := oc.Responses.New(ctx, rp, optionSeed(2))
			if err != nil {
				t.Fatal(err)
			}
			var call *responses.ResponseOutputItemUnion
			for i := range resp.Output {
				if resp.Output[i].Type == "function_call" {
					call = &resp.Output[i]
				}
			}
			if call == nil || call.Name != "get_weather" || call.CallID == "" {
				t.Fatalf("output %+v", resp.Output)
			}
			checkWeatherArgs(t, call.Arguments.OfString)
			output := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temp": 21}`)
			output.OfFunctionCallOutput.CallID = oai.String(call.CallID)
			rnext := rp
			rnext.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oai.Opt(responses.ToolChoiceOptionsAuto)}
			rnext.MaxOutputTokens = oai.Int(8)
			rnext.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(call.Arguments.OfString, call.CallID, call.Name),
				output,
			}}
			if _, err := oc.Responses.New(ctx, rnext); err != nil {
				t.Fatalf("Responses, the result's turn: %v", err)
			}
		})
	}
}
