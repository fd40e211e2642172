package serve_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

func greedyResponse(instructions, input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: testModel, Instructions: oai.String(instructions), MaxOutputTokens: oai.Int(24), Temperature: oai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(input)},
	}
}

func TestResponsesWithSDK(t *testing.T) {
	s := startServer(t, "secret", 2)
	c := s.client()
	ctx := context.Background()
	want := greedyReply(t, s, "Be brief.", "Say hello", 24)
	params := greedyResponse("Be brief.", "Say hello")
	resp, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.OutputText(); got != want || want == "" {
		t.Fatalf("output %q, want the chat reply %q", got, want)
	}
	if !strings.HasPrefix(resp.ID, "resp_") || resp.Object != "response" || len(resp.Output) != 1 || resp.Output[0].Type != "message" ||
		resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 || resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
		t.Errorf("response %+v", resp)
	}
	if (resp.Status == "incomplete") != (resp.Usage.OutputTokens == 24) || (resp.Status == "incomplete" && resp.IncompleteDetails.Reason != "max_output_tokens") {
		t.Errorf("status %q, %d output tokens, %+v", resp.Status, resp.Usage.OutputTokens, resp.IncompleteDetails)
	}

	// Items as input, the same conversation: the same reply.
	items := params
	items.Instructions = oai.String("")
	items.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Be brief.", responses.EasyInputMessageRoleSystem),
		responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
			{OfInputText: &responses.ResponseInputTextParam{Text: "Say "}}, {OfInputText: &responses.ResponseInputTextParam{Text: "hello"}}},
			responses.EasyInputMessageRoleUser),
	}}
	again, err := c.Responses.New(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if again.OutputText() != want {
		t.Errorf("input items: %q, want %q", again.OutputText(), want)
	}

	// Streamed: its typed events, the same text.
	stream := c.Responses.NewStreaming(ctx, params)
	var events []string
	var deltas strings.Builder
	var done responses.Response
	seq := int64(-1)
	for stream.Next() {
		ev := stream.Current()
		events = append(events, ev.Type)
		if ev.SequenceNumber != seq+1 {
			t.Errorf("event %s has sequence number %d after %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed", "response.incomplete":
			done = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	wantEvents := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta"}
	tail := []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response." + map[bool]string{true: "incomplete", false: "completed"}[resp.Status == "incomplete"]}
	if len(events) < len(wantEvents)+len(tail) || strings.Join(events[:len(wantEvents)], " ") != strings.Join(wantEvents, " ") ||
		strings.Join(events[len(events)-len(tail):], " ") != strings.Join(tail, " ") {
		t.Errorf("events %v", events)
	}
	if deltas.String() != want || done.OutputText() != want || done.Usage.OutputTokens != resp.Usage.OutputTokens {
		t.Errorf("streamed %q, final %q (usage %+v); want %q", deltas.String(), done.OutputText(), done.Usage, want)
	}
}

// thing is a structured reply: its schema comes from the Go type, as
// openai-go's users generate it (invopop/jsonschema), with bounds on
// lengths, counts and an integer, and optional fields.
type thing struct {
	Name  string   `json:"name" jsonschema:"minLength=1,maxLength=12"`
	Tags  []string `json:"tags" jsonschema:"minItems=1,maxItems=3,enum=a,enum=b"`
	Count int      `json:"count" jsonschema:"minimum=3,maximum=250"`
	Note  string   `json:"note,omitempty" jsonschema:"maxLength=8"`
	Done  bool     `json:"done,omitempty"`
}

// text.format json_schema goes through the grammar: every reply parses
// and fits the schema.
func TestResponsesJSONSchema(t *testing.T) {
	s := startServer(t, "", 2)
	c := s.client()
	reflector := jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true}
	b, err := json.Marshal(reflector.Reflect(&thing{}))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	for seed := range 3 {
		p := responses.ResponseNewParams{
			Model: testModel, MaxOutputTokens: oai.Int(200), Temperature: oai.Float(1),
			Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Describe a thing")},
			Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
				OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "thing", Schema: schema, Strict: oai.Bool(true)}}},
		}
		resp, err := c.Responses.New(context.Background(), p, optionSeed(seed))
		if err != nil {
			t.Fatal(err)
		}
		out := resp.OutputText()
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		var v struct {
			Name  *string  `json:"name"`
			Tags  []string `json:"tags"`
			Count *int     `json:"count"`
			Note  *string  `json:"note"`
			Done  *bool    `json:"done"`
		}
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("seed %d: %q does not decode: %v", seed, out, err)
		}
		ok := v.Name != nil && len([]rune(*v.Name)) >= 1 && len([]rune(*v.Name)) <= 12 && len(v.Tags) >= 1 && len(v.Tags) <= 3 &&
			v.Count != nil && *v.Count >= 3 && *v.Count <= 250 && (v.Note == nil || len([]rune(*v.Note)) <= 8)
		for _, tag := range v.Tags {
			ok = ok && (tag == "a" || tag == "b")
		}
		if !ok {
			t.Errorf("seed %d: %q does not fit the schema", seed, out)
		}
	}
}

// A function tool's call comes back as a function_call item (streamed as
// function_call_arguments events), and its output goes into the next
// request.
func TestResponsesToolRoundTrip(t *testing.T) {
	s := startServer(t, "", 2)
	c := s.client()
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model: testModel, MaxOutputTokens: oai.Int(120), Temperature: oai.Float(0.7),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("What is the weather in Paris?")},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Strict: oai.Bool(true),
			Parameters: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"city": map[string]any{"type": "string", "maxLength": 20},
					"unit": map[string]any{"enum": []string{"C", "F"}},
				},
				"required": []string{"city", "unit"},
			}}}},
		ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}},
	}
	resp, err := c.Responses.New(ctx, params, optionSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	var call *responses.ResponseOutputItemUnion
	for i := range resp.Output {
		if resp.Output[i].Type == "function_call" {
			call = &resp.Output[i]
		}
	}
	if call == nil || call.Name != "get_weather" || call.CallID == "" || resp.Status != "completed" {
		t.Fatalf("output %+v", resp.Output)
	}
	checkWeatherArgs(t, call.Arguments.OfString)

	stream := c.Responses.NewStreaming(ctx, params, optionSeed(1))
	var args string
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.function_call_arguments.done" {
			args = ev.Arguments
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if args != call.Arguments.OfString {
		t.Errorf("streamed arguments %q, whole %q", args, call.Arguments.OfString)
	}

	output := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temp": 21}`)
	output.OfFunctionCallOutput.CallID = oai.String(call.CallID)
	next := params
	next.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oai.Opt(responses.ToolChoiceOptionsNone)}
	next.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(call.Arguments.OfString, call.CallID, call.Name),
		output,
	}}
	reply, err := c.Responses.New(ctx, next, optionSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.Output) == 0 || reply.Output[0].Type != "message" {
		t.Errorf("after the call's output: %+v", reply.Output)
	}
}

func TestResponsesRefusals(t *testing.T) {
	s := startServer(t, "", 1)
	for _, c := range []struct{ name, body, says string }{
		{"previous_response_id", `{"input":"hi","previous_response_id":"resp_1"}`, "previous_response_id is not supported"},
		{"an image", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, `"input_image"`},
		{"a hosted tool", `{"input":"hi","tools":[{"type":"web_search"}]}`, `"web_search"`},
		{"an unknown item", `{"input":[{"type":"computer_call"}]}`, `"computer_call"`},
		{"empty input", `{"input":[]}`, "input must not be empty"},
		{"input of a number", `{"input":5}`, "input must be"},
		{"a bad format", `{"input":"hi","text":{"format":{"type":"xml"}}}`, "response_format must be"},
		{"zero output tokens", `{"input":"hi","max_output_tokens":0}`, "max_output_tokens must be at least 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, s, "/v1/responses", c.body)
			if msg, _, _ := apiError(t, r); r.status != 400 || !strings.Contains(msg, c.says) {
				t.Errorf("%d %s", r.status, r.body)
			}
		})
	}
}
