package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/bonsai-chat/bonsai/infer/openai"
)

// OpenAI's Responses API (POST /v1/responses), the newer SDKs' default:
// input items become chat messages for the chat pipeline, and its reply
// comes back as output items (reasoning, message, function_call), whole
// or as the API's typed stream of events. Nothing is stored: a request
// carries its whole conversation (previous_response_id is refused).

type responsesRequest struct {
	Model              string          `json:"model"`
	Input              responsesInput  `json:"input"`
	Instructions       string          `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float32        `json:"temperature"`
	TopP               *float32        `json:"top_p"`
	TopK               *int            `json:"top_k"`
	Seed               *int64          `json:"seed"`
	Stream             bool            `json:"stream"`
	Tools              []responsesTool `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	PreviousResponseID string          `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Metadata           json.RawMessage `json:"metadata"`
	Text               *struct {
		Format *responsesFormat `json:"format"`
	} `json:"text"`
	Reasoning *struct {
		Effort *string `json:"effort"`
	} `json:"reasoning"`
}

type responsesFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// responsesInput is input: a string (one user message) or an array of
// items.
type responsesInput []responsesItem

func (in *responsesInput) UnmarshalJSON(b []byte) error {
	one := func(s string) {
		*in = responsesInput{{Type: "message", Role: "user", Content: responsesContent{{Type: "input_text", Text: s}}}}
	}
	return openai.DecodeStringOr(b, func() { *in = nil }, one, func(b []byte) error {
		var items []responsesItem
		if err := json.Unmarshal(b, &items); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return err
			}
			return errors.New("input must be a string or an array of input items")
		}
		*in = items
		return nil
	})
}

// responsesItem is an input item: a message, a function call the model
// made, a call's output, or a reasoning item (its text is not sent back to
// the model, as Qwen3's template drops earlier turns' reasoning).
type responsesItem struct {
	Type      string           `json:"type"`
	Role      string           `json:"role"`
	Content   responsesContent `json:"content"`
	CallID    string           `json:"call_id"`
	Name      string           `json:"name"`
	Arguments string           `json:"arguments"`
	Output    responsesContent `json:"output"`
}

// responsesContent is a message's content: a string or an array of parts.
type responsesContent []struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (c *responsesContent) UnmarshalJSON(b []byte) error {
	return openai.DecodeStringOr(b, func() { *c = nil }, func(s string) { *c = responsesContent{{Type: "input_text", Text: s}} }, c.decodeParts)
}

// decodeParts decodes an array of content parts into c.
func (c *responsesContent) decodeParts(b []byte) error {
	type parts responsesContent
	var p parts
	if err := json.Unmarshal(b, &p); err != nil {
		return errors.New("content must be a string or an array of content parts")
	}
	*c = responsesContent(p)
	return nil
}

// text joins the parts' text; a part that is not text is refused.
func (c responsesContent) text(where string) (string, *apiError) {
	var b strings.Builder
	for i, p := range c {
		switch p.Type {
		case "input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal":
			b.WriteString(p.Text)
		default:
			return "", badRequest(fmt.Sprintf("%s[%d].type", where, i), "content parts of type %q are not supported: this model reads text", p.Type)
		}
	}
	return b.String(), nil
}

// responsesObject is a response, whole or as a stream's events carry it.
type responsesObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []responsesOut  `json:"output"`
	Usage             *responsesUsage `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error              *struct{}       `json:"error"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float32        `json:"temperature"`
	TopP               *float32        `json:"top_p"`
	Tools              []responsesTool `json:"tools"`
	ToolChoice         any             `json:"tool_choice"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Store              bool            `json:"store"`
	Metadata           json.RawMessage `json:"metadata"`
	Text               map[string]any  `json:"text"`
	Truncation         string          `json:"truncation"`
}

// responsesOut is an output item.
type responsesOut struct {
	Type      string           `json:"type"` // message, function_call, reasoning
	ID        string           `json:"id"`
	Status    string           `json:"status,omitempty"`
	Role      string           `json:"role,omitempty"`
	Content   []map[string]any `json:"content,omitempty"`
	Summary   *[]any           `json:"summary,omitempty"`
	CallID    string           `json:"call_id,omitempty"`
	Name      string           `json:"name,omitempty"`
	Arguments *string          `json:"arguments,omitempty"`
}

type responsesUsage struct {
	InputTokens        int            `json:"input_tokens"`
	InputTokensDetails map[string]int `json:"input_tokens_details"`
	OutputTokens       int            `json:"output_tokens"`
	TotalTokens        int            `json:"total_tokens"`
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func reasoningItem(id, text string) responsesOut {
	o := responsesOut{Type: "reasoning", ID: id, Summary: &[]any{}}
	if text != "" {
		o.Content = []map[string]any{{"type": "reasoning_text", "text": text}}
	}
	return o
}

func messageItem(id, status string, text *string) responsesOut {
	o := responsesOut{Type: "message", ID: id, Status: status, Role: "assistant", Content: []map[string]any{}}
	if text != nil {
		o.Content = append(o.Content, outputText(*text))
	}
	return o
}

func callItem(id, status string, c toolCall) responsesOut {
	args := c.Arguments
	return responsesOut{Type: "function_call", ID: id, Status: status, CallID: c.ID, Name: c.Name, Arguments: &args}
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request, m *Model) {
	var req responsesRequest
	if !s.decode(w, r, &req) {
		return
	}
	creq, aerr := req.chat(m)
	if aerr != nil {
		aerr.write(w)
		return
	}
	base := req.object(m)
	if req.Stream {
		s.responsesStream(w, r, m, creq, base)
		return
	}
	c, o, aerr, gone := s.generate(r.Context(), m, creq, nil)
	if gone {
		return
	}
	if aerr != nil {
		aerr.write(w)
		return
	}
	if th := c.out.reasoning.String(); th != "" {
		base.Output = append(base.Output, reasoningItem(newID("rs_"), th))
	}
	if text := replyText(c); text != "" || len(c.out.calls) == 0 {
		base.Output = append(base.Output, messageItem(newID("msg_"), "completed", &text))
	}
	for _, tc := range c.out.calls {
		base.Output = append(base.Output, callItem(newID("fc_"), "completed", tc))
	}
	finishResponse(&base, o)
	writeJSON(w, http.StatusOK, base)
}

// finishResponse sets a response's status and usage from how its
// generation ended.
func finishResponse(resp *responsesObject, o outcome) {
	resp.Status = "completed"
	if o.finish == "length" {
		resp.Status = "incomplete"
		resp.IncompleteDetails = &struct {
			Reason string `json:"reason"`
		}{"max_output_tokens"}
	}
	r := o.res
	resp.Usage = &responsesUsage{InputTokens: r.PromptTokens, InputTokensDetails: map[string]int{"cached_tokens": r.Resumed},
		OutputTokens: r.CompletionTokens, TotalTokens: r.PromptTokens + r.CompletionTokens}
}

// object is the response as it starts: the request's settings echoed, no
// output yet.
func (req *responsesRequest) object(m *Model) responsesObject {
	o := responsesObject{ID: newID("resp_"), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress", Model: m.ID,
		Output: []responsesOut{}, MaxOutputTokens: req.MaxOutputTokens, Temperature: req.Temperature, TopP: req.TopP,
		Tools: nonNil(req.Tools), ToolChoice: "auto", ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		Metadata: json.RawMessage("{}"), Text: map[string]any{"format": map[string]string{"type": "text"}}, Truncation: "disabled"}
	if req.Instructions != "" {
		o.Instructions = &req.Instructions
	}
	if len(bytes.TrimSpace(req.Metadata)) > 0 && !bytes.Equal(bytes.TrimSpace(req.Metadata), []byte("null")) {
		o.Metadata = req.Metadata
	}
	if len(req.ToolChoice) > 0 {
		o.ToolChoice = req.ToolChoice
	}
	if req.Text != nil && req.Text.Format != nil {
		o.Text = map[string]any{"format": req.Text.Format}
	}
	return o
}

func (s *Server) responsesStream(w http.ResponseWriter, r *http.Request, m *Model, creq *openai.ChatRequest, resp responsesObject) {
	var es *eventStream
	seq := 0
	send := func(typ string, fields map[string]any) error {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		return es.send(typ, fields)
	}
	start := func() error {
		if es != nil {
			return nil
		}
		es = newEventStream(w)
		if err := send("response.created", map[string]any{"response": resp}); err != nil {
			return err
		}
		return send("response.in_progress", map[string]any{"response": resp})
	}
	// The item being written: its index in the output, kind and text.
	open, index := "", -1
	var item responsesOut
	var text strings.Builder
	pending := ""
	closeItem := func() error {
		switch open {
		case "":
			return nil
		case "reasoning":
			item = reasoningItem(item.ID, text.String())
			if err := send("response.reasoning_text.done", map[string]any{"item_id": item.ID, "output_index": index, "content_index": 0, "text": text.String()}); err != nil {
				return err
			}
		case "message":
			t := text.String()
			item = messageItem(item.ID, "completed", &t)
			if err := send("response.output_text.done", map[string]any{"item_id": item.ID, "output_index": index, "content_index": 0, "text": t, "logprobs": []any{}}); err != nil {
				return err
			}
			if err := send("response.content_part.done", map[string]any{"item_id": item.ID, "output_index": index, "content_index": 0, "part": outputText(t)}); err != nil {
				return err
			}
		}
		open = ""
		resp.Output = append(resp.Output, item)
		return send("response.output_item.done", map[string]any{"output_index": index, "item": item})
	}
	openItem := func(it responsesOut) error {
		if err := closeItem(); err != nil {
			return err
		}
		index++
		open, item = it.Type, it
		text.Reset()
		if err := send("response.output_item.added", map[string]any{"output_index": index, "item": it}); err != nil {
			return err
		}
		if it.Type == "message" {
			return send("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": index, "content_index": 0, "part": outputText("")})
		}
		return nil
	}
	emit := func(d delta) error {
		if err := start(); err != nil {
			return err
		}
		if d.reasoning != "" {
			if open != "reasoning" {
				if err := openItem(responsesOut{Type: "reasoning", ID: newID("rs_"), Summary: &[]any{}}); err != nil {
					return err
				}
			}
			text.WriteString(d.reasoning)
			if err := send("response.reasoning_text.delta", map[string]any{"item_id": item.ID, "output_index": index, "content_index": 0, "delta": d.reasoning}); err != nil {
				return err
			}
		}
		if t := pending + d.content; t != "" {
			pending = ""
			if open != "message" && strings.TrimFunc(t, unicode.IsSpace) == "" {
				pending = t // only whitespace yet: it may lead up to a call
			} else {
				if open != "message" {
					if err := openItem(messageItem(newID("msg_"), "in_progress", nil)); err != nil {
						return err
					}
				}
				text.WriteString(t)
				if err := send("response.output_text.delta", map[string]any{"item_id": item.ID, "output_index": index, "content_index": 0, "delta": t, "logprobs": []any{}}); err != nil {
					return err
				}
			}
		}
		for _, tc := range d.calls {
			pending = ""
			if err := closeItem(); err != nil {
				return err
			}
			index++
			empty := ""
			added := callItem(newID("fc_"), "in_progress", tc)
			added.Arguments = &empty
			if err := send("response.output_item.added", map[string]any{"output_index": index, "item": added}); err != nil {
				return err
			}
			if err := send("response.function_call_arguments.delta", map[string]any{"item_id": added.ID, "output_index": index, "delta": tc.Arguments}); err != nil {
				return err
			}
			if err := send("response.function_call_arguments.done", map[string]any{"item_id": added.ID, "output_index": index, "name": tc.Name, "arguments": tc.Arguments}); err != nil {
				return err
			}
			done := added
			done.Status, done.Arguments = "completed", &tc.Arguments
			resp.Output = append(resp.Output, done)
			if err := send("response.output_item.done", map[string]any{"output_index": index, "item": done}); err != nil {
				return err
			}
		}
		return nil
	}
	_, o, aerr, gone := s.generate(r.Context(), m, creq, emit)
	if gone {
		return
	}
	if aerr != nil {
		if es == nil {
			aerr.write(w)
			return
		}
		send("error", map[string]any{"code": aerr.code, "message": aerr.msg, "param": nil})
		return
	}
	if start() != nil {
		return
	}
	if index < 0 { // an empty reply is one message with empty text
		if openItem(messageItem(newID("msg_"), "in_progress", nil)) != nil {
			return
		}
	}
	if closeItem() != nil {
		return
	}
	finishResponse(&resp, o)
	event := "response.completed"
	if resp.Status == "incomplete" {
		event = "response.incomplete"
	}
	send(event, map[string]any{"response": resp})
}

// chat translates the request into the chat pipeline's.
func (req *responsesRequest) chat(m *Model) (*openai.ChatRequest, *apiError) {
	if !m.answersTo(req.Model) {
		return nil, notFound(m, req.Model)
	}
	if req.PreviousResponseID != "" {
		return nil, badRequest("previous_response_id", "previous_response_id is not supported: this server stores no responses, so send the whole conversation in input")
	}
	if c := bytes.TrimSpace(req.Conversation); len(c) > 0 && !bytes.Equal(c, []byte("null")) {
		return nil, badRequest("conversation", "conversation is not supported: this server stores no conversations, so send the whole conversation in input")
	}
	out := &openai.ChatRequest{MaxTokens: req.MaxOutputTokens, Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, Seed: req.Seed}
	if req.MaxOutputTokens != nil && *req.MaxOutputTokens < 1 {
		return nil, badRequest("max_output_tokens", "max_output_tokens must be at least 1, not %d", *req.MaxOutputTokens)
	}
	if rs := req.Reasoning; rs != nil && rs.Effort != nil && *rs.Effort != "none" && *rs.Effort != "minimal" {
		on := true
		out.ChatTemplateKwargs = &openai.TemplateKwargs{EnableThinking: &on}
	}
	for i, t := range req.Tools {
		if t.Type != "function" {
			return nil, badRequest(fmt.Sprintf("tools[%d].type", i), "tools of type %q are not supported: only function tools", t.Type)
		}
		out.Tools = append(out.Tools, openai.Tool{Type: "function", Function: openai.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	if tc := bytes.TrimSpace(req.ToolChoice); len(tc) > 0 && tc[0] == '{' {
		var named struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if json.Unmarshal(tc, &named) != nil || named.Type != "function" {
			return nil, badRequest("tool_choice", "tool_choice must be none, auto, required or {\"type\": \"function\", \"name\": …}")
		}
		out.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": named.Name}})
	} else {
		out.ToolChoice = req.ToolChoice
	}
	if req.Text != nil && req.Text.Format != nil {
		f := req.Text.Format
		rf := &openai.ResponseFormat{Type: f.Type}
		if f.Type == "json_schema" {
			rf.JSONSchema = &openai.JSONSchema{Name: f.Name, Schema: f.Schema, Strict: f.Strict}
		}
		out.ResponseFormat = rf
	}
	if req.Instructions != "" {
		out.Messages = append(out.Messages, openai.Message{Role: "system", Content: openai.Content(req.Instructions)})
	}
	if len(req.Input) == 0 {
		return nil, badRequest("input", "input must not be empty")
	}
	for i, it := range req.Input {
		where := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "message", "":
			text, aerr := it.Content.text(where + ".content")
			if aerr != nil {
				return nil, aerr
			}
			switch it.Role {
			case "user", "system", "developer", "assistant":
			default:
				return nil, badRequest(where+".role", "role must be user, system, developer or assistant, not %q", it.Role)
			}
			out.Messages = append(out.Messages, openai.Message{Role: it.Role, Content: openai.Content(text)})
		case "function_call":
			call := openai.ToolCall{ID: it.CallID, Type: "function", Function: openai.FunctionCall{Name: it.Name, Arguments: it.Arguments}}
			if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == "assistant" {
				out.Messages[n-1].ToolCalls = append(out.Messages[n-1].ToolCalls, call)
			} else {
				out.Messages = append(out.Messages, openai.Message{Role: "assistant", ToolCalls: []openai.ToolCall{call}})
			}
		case "function_call_output":
			text, aerr := it.Output.text(where + ".output")
			if aerr != nil {
				return nil, aerr
			}
			out.Messages = append(out.Messages, openai.Message{Role: "tool", Content: openai.Content(text), ToolCallID: it.CallID})
		case "reasoning":
		default:
			return nil, badRequest(where+".type", "input items of type %q are not supported (message, function_call, function_call_output and reasoning are)", it.Type)
		}
	}
	return out, nil
}
