package serve

import (
	"encoding/json"
	"net/http"
	"testing"
)

// The request decoders and translations of the Anthropic, Responses and
// ollama APIs take any body without panicking, and every refusal is a 4xx
// with a message; what they accept translates into messages the template
// takes.

var fuzzModel = &Model{ID: "m"}

// checkTranslation fails on a refusal that is not a client error, and
// runs an accepted request's messages through the chat conversion.
func checkTranslation(t *testing.T, aerr *apiError, chat func() error) {
	t.Helper()
	if aerr != nil {
		if aerr.status < 400 || aerr.status >= 500 || aerr.msg == "" {
			t.Fatalf("refused with %d %q", aerr.status, aerr.msg)
		}
		return
	}
	if err := chat(); err != nil {
		t.Fatal(err)
	}
}

func FuzzAnthropicRequest(f *testing.F) {
	f.Add(`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"a","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"r"}],"is_error":true}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"}}`)
	f.Add(`{"max_tokens":1,"messages":[{"role":"system","content":"x"}],"output_config":{"format":{"type":"json_schema","schema":{}}},"thinking":{"type":"enabled"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		var req anthropicRequest
		if json.Unmarshal([]byte(body), &req) != nil {
			return
		}
		creq, aerr := req.chat(fuzzModel)
		checkTranslation(t, aerr, func() error {
			_, aerr := convertMessages(creq.Messages, creq.Tools, "")
			if aerr != nil && aerr.status != http.StatusBadRequest {
				t.Fatalf("conversion: %d %q", aerr.status, aerr.msg)
			}
			_, err := json.Marshal(creq)
			return err
		})
	})
}

func FuzzResponsesRequest(f *testing.F) {
	f.Add(`{"model":"m","instructions":"i","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"},{"type":"reasoning","summary":[]}],"tools":[{"type":"function","name":"f","parameters":{}}],"tool_choice":{"type":"function","name":"f"},"text":{"format":{"type":"json_schema","name":"n","schema":{}}},"reasoning":{"effort":"high"}}`)
	f.Add(`{"input":"hi","max_output_tokens":3,"previous_response_id":""}`)
	f.Fuzz(func(t *testing.T, body string) {
		var req responsesRequest
		if json.Unmarshal([]byte(body), &req) != nil {
			return
		}
		creq, aerr := req.chat(fuzzModel)
		checkTranslation(t, aerr, func() error {
			convertMessages(creq.Messages, creq.Tools, "")
			if _, err := json.Marshal(req.object(fuzzModel)); err != nil {
				return err
			}
			_, err := json.Marshal(creq)
			return err
		})
	})
}

func FuzzOllamaRequests(f *testing.F) {
	f.Add(`{"model":"m:latest","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","tool_name":"f","content":"x"}],"format":"json","options":{"temperature":0.5,"stop":["a"],"num_predict":-1},"think":"high","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`)
	f.Add(`{"format":{"type":"object"},"think":false,"options":{"seed":1}}`)
	f.Fuzz(func(t *testing.T, body string) {
		var req ollamaChatRequest
		if json.Unmarshal([]byte(body), &req) == nil {
			creq, aerr := req.chat(fuzzModel)
			checkTranslation(t, aerr, func() error {
				convertMessages(creq.Messages, creq.Tools, "")
				_, err := json.Marshal(creq)
				return err
			})
		}
		var gen ollamaGenerateRequest
		if json.Unmarshal([]byte(body), &gen) == nil {
			_, aerr := ollamaFormat(gen.Format)
			checkTranslation(t, aerr, func() error { return nil })
		}
	})
}

func FuzzEmbedInput(f *testing.F) {
	for _, s := range []string{`"a"`, `["a","b"]`, `[1,2,3]`, `[[1],[2,3]]`, `[]`, `null`, `[1,"a"]`, `[[]]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var in embedInput
		if json.Unmarshal([]byte(body), &in) != nil {
			return
		}
		if in.count() > maxEmbedInputs {
			t.Fatalf("%d inputs accepted", in.count())
		}
		if len(in.texts) > 0 && len(in.tokens) > 0 {
			t.Fatal("texts and token arrays in one input")
		}
	})
}
