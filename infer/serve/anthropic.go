package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/bonsai-chat/bonsai/infer/openai"
)

// Anthropic's Messages API (POST /v1/messages), as llama-server also
// serves it: the request is translated into a chat request and the chat
// pipeline's reply written back as content blocks.

type anthropicRequest struct {
	Model         string               `json:"model"`
	MaxTokens     *int                 `json:"max_tokens"`
	System        anthropicContent     `json:"system"`
	Messages      []anthropicMessage   `json:"messages"`
	StopSequences []string             `json:"stop_sequences"`
	Temperature   *float32             `json:"temperature"`
	TopP          *float32             `json:"top_p"`
	TopK          *int                 `json:"top_k"`
	Seed          *int64               `json:"seed"` // not Anthropic's: llama-server's, for repeatable replies
	Stream        bool                 `json:"stream"`
	Tools         []anthropicTool      `json:"tools"`
	ToolChoice    *anthropicToolChoice `json:"tool_choice"`
	Thinking      *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	// OutputConfig.Format is structured output: a JSON schema the reply
	// follows (the grammar enforces it, as response_format's).
	OutputConfig *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content anthropicContent `json:"content"`
}

// anthropicContent is a string (one text block) or an array of blocks on
// the wire.
type anthropicContent []anthropicBlock

func (c *anthropicContent) UnmarshalJSON(b []byte) error {
	return openai.DecodeStringOr(b, func() { *c = nil }, func(s string) { *c = anthropicContent{{Type: "text", Text: s}} }, func(b []byte) error {
		var blocks []anthropicBlock
		if err := json.Unmarshal(b, &blocks); err != nil {
			return errors.New("content must be a string or an array of content blocks")
		}
		*c = blocks
		return nil
	})
}

// anthropicBlock is a content block: text, thinking, tool_use (an
// assistant's call) or tool_result (the user's answer to one).
type anthropicBlock struct {
	Type      string           `json:"type"`
	Text      string           `json:"text,omitempty"`
	Thinking  string           `json:"thinking,omitempty"`
	ID        string           `json:"id,omitempty"`
	Name      string           `json:"name,omitempty"`
	Input     json.RawMessage  `json:"input,omitempty"`
	ToolUseID string           `json:"tool_use_id,omitempty"`
	Content   anthropicContent `json:"content,omitempty"`
	IsError   bool             `json:"is_error,omitempty"`
}

type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthropicToolChoice struct {
	Type string `json:"type"` // auto, any, tool, none
	Name string `json:"name"`
}

// anthropicResponse is a whole reply, and the message of a stream's
// message_start.
type anthropicResponse struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"` // "message"
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []anthropicOut `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

// anthropicOut is a reply's content block.
type anthropicOut struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

type anthropicUsage struct {
	InputTokens          int `json:"input_tokens"`
	OutputTokens         int `json:"output_tokens"`
	CacheReadInputTokens int `json:"cache_read_input_tokens"`
}

// anthropicUsageOf is a generation's usage in Anthropic's terms: the
// prompt's tokens split into those read from the cache (the same
// conversation's earlier turns, as usageOf tells them) and the others.
func anthropicUsageOf(o outcome) anthropicUsage {
	r := o.res
	return anthropicUsage{InputTokens: r.PromptTokens - r.Resumed, OutputTokens: r.CompletionTokens, CacheReadInputTokens: r.Resumed}
}

// anthropicFail writes an error in Anthropic's shape.
func anthropicFail(e *apiError, w http.ResponseWriter) {
	typ := e.typ
	switch {
	case e.status == http.StatusNotFound:
		typ = "not_found_error"
	case e.status == http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case e.status == http.StatusServiceUnavailable:
		typ = "overloaded_error"
	case e.status >= 500:
		typ = "api_error"
	}
	writeJSON(w, e.status, map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": e.msg}})
}

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request, m *Model) {
	var req anthropicRequest
	if aerr := s.decodeBody(w, r, &req); aerr != nil {
		anthropicFail(aerr, w)
		return
	}
	creq, aerr := req.chat(m)
	if aerr != nil {
		anthropicFail(aerr, w)
		return
	}
	id := newID("msg_")
	if req.Stream {
		s.anthropicStream(w, r, m, creq, id)
		return
	}
	c, o, aerr, gone := s.generate(r.Context(), m, creq, nil)
	if gone {
		return
	}
	if aerr != nil {
		anthropicFail(aerr, w)
		return
	}
	resp := anthropicResponse{ID: id, Type: "message", Role: "assistant", Model: m.ID, Content: []anthropicOut{},
		Usage: anthropicUsageOf(o)}
	if th := c.out.reasoning.String(); th != "" {
		sig := ""
		resp.Content = append(resp.Content, anthropicOut{Type: "thinking", Thinking: &th, Signature: &sig})
	}
	if text := replyText(c); text != "" || len(c.out.calls) == 0 {
		resp.Content = append(resp.Content, anthropicOut{Type: "text", Text: &text})
	}
	for _, tc := range c.out.calls {
		resp.Content = append(resp.Content, anthropicOut{Type: "tool_use", ID: newID("toolu_"), Name: tc.Name, Input: argsObject(tc.Arguments)})
	}
	reason, seq := anthropicStop(o, c)
	resp.StopReason, resp.StopSequence = &reason, seq
	writeJSON(w, http.StatusOK, resp)
}

// anthropicStop is a generation's stop_reason and stop_sequence.
func anthropicStop(o outcome, c *chatCall) (string, *string) {
	switch {
	case len(c.out.calls) > 0 && o.finish == "stop":
		return "tool_use", nil
	case o.finish == "length":
		return "max_tokens", nil
	case o.stop != "":
		return "stop_sequence", &o.stop
	}
	return "end_turn", nil
}

func (s *Server) anthropicStream(w http.ResponseWriter, r *http.Request, m *Model, creq *openai.ChatRequest, id string) {
	var es *eventStream
	index, open := -1, "" // the block being written, and its type
	pending := ""         // whitespace that may only lead up to a tool call
	start := func() error {
		if es != nil {
			return nil
		}
		es = newEventStream(w)
		msg := anthropicResponse{ID: id, Type: "message", Role: "assistant", Model: m.ID, Content: []anthropicOut{}}
		if err := es.send("message_start", map[string]any{"type": "message_start", "message": msg}); err != nil {
			return err
		}
		return es.send("ping", map[string]string{"type": "ping"})
	}
	closeBlock := func() error {
		if open == "" {
			return nil
		}
		open = ""
		return es.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
	}
	block := func(b anthropicOut) error {
		if err := closeBlock(); err != nil {
			return err
		}
		index++
		open = b.Type
		return es.send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": b})
	}
	blockDelta := func(d map[string]string) error {
		return es.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
	}
	empty := ""
	emit := func(d delta) error {
		if err := start(); err != nil {
			return err
		}
		if d.reasoning != "" {
			if open != "thinking" {
				if err := block(anthropicOut{Type: "thinking", Thinking: &empty, Signature: &empty}); err != nil {
					return err
				}
			}
			if err := blockDelta(map[string]string{"type": "thinking_delta", "thinking": d.reasoning}); err != nil {
				return err
			}
		}
		if text := pending + d.content; text != "" {
			pending = ""
			if open != "text" && strings.TrimFunc(text, unicode.IsSpace) == "" {
				pending = text
			} else {
				if open != "text" {
					if err := block(anthropicOut{Type: "text", Text: &empty}); err != nil {
						return err
					}
				}
				if err := blockDelta(map[string]string{"type": "text_delta", "text": text}); err != nil {
					return err
				}
			}
		}
		for _, tc := range d.calls {
			pending = ""
			if err := block(anthropicOut{Type: "tool_use", ID: newID("toolu_"), Name: tc.Name, Input: json.RawMessage("{}")}); err != nil {
				return err
			}
			if err := blockDelta(map[string]string{"type": "input_json_delta", "partial_json": string(argsObject(tc.Arguments))}); err != nil {
				return err
			}
		}
		return nil
	}
	c, o, aerr, gone := s.generate(r.Context(), m, creq, emit)
	if gone {
		return
	}
	if aerr != nil {
		if es == nil {
			anthropicFail(aerr, w)
			return
		}
		es.send("error", map[string]any{"type": "error", "error": map[string]string{"type": "api_error", "message": aerr.msg}})
		return
	}
	if start() != nil {
		return
	}
	if index < 0 { // an empty reply is one empty text block
		if block(anthropicOut{Type: "text", Text: &empty}) != nil {
			return
		}
	}
	if closeBlock() != nil {
		return
	}
	reason, seq := anthropicStop(o, c)
	if es.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq},
		"usage": anthropicUsageOf(o)}) != nil {
		return
	}
	es.send("message_stop", map[string]string{"type": "message_stop"})
}

// anthropicCountTokens is POST /v1/messages/count_tokens: the prompt's
// tokens as the chat template writes it.
func (s *Server) anthropicCountTokens(w http.ResponseWriter, r *http.Request, m *Model) {
	var req anthropicRequest
	if aerr := s.decodeBody(w, r, &req); aerr != nil {
		anthropicFail(aerr, w)
		return
	}
	if req.MaxTokens == nil {
		one := 1
		req.MaxTokens = &one
	}
	creq, aerr := req.chat(m)
	if aerr != nil {
		anthropicFail(aerr, w)
		return
	}
	c, aerr := s.prepareChat(r.Context(), m, creq)
	if aerr != nil {
		anthropicFail(aerr, w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(c.prompt)})
}

// chat translates the request into the chat pipeline's.
func (req *anthropicRequest) chat(m *Model) (*openai.ChatRequest, *apiError) {
	if !m.answersTo(req.Model) {
		return nil, notFound(m, req.Model)
	}
	if req.MaxTokens == nil {
		return nil, badRequest("max_tokens", "max_tokens is required")
	}
	out := &openai.ChatRequest{MaxTokens: req.MaxTokens, Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK,
		Seed: req.Seed, Stop: req.StopSequences}
	if req.Thinking != nil && req.Thinking.Type == "enabled" {
		on := true
		out.ChatTemplateKwargs = &openai.TemplateKwargs{EnableThinking: &on}
	}
	for i, t := range req.Tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, badRequest(fmt.Sprintf("tools[%d].type", i), "tools of type %q are not supported: only custom tools with an input_schema", t.Type)
		}
		out.Tools = append(out.Tools, openai.Tool{Type: "function", Function: openai.ToolFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
	}
	if tc := req.ToolChoice; tc != nil {
		var choice any
		switch tc.Type {
		case "auto", "none":
			choice = tc.Type
		case "any":
			choice = "required"
		case "tool":
			choice = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		default:
			return nil, badRequest("tool_choice.type", "tool_choice must be auto, any, tool or none, not %q", tc.Type)
		}
		out.ToolChoice, _ = json.Marshal(choice)
	}
	if oc := req.OutputConfig; oc != nil && oc.Format != nil {
		if oc.Format.Type != "json_schema" {
			return nil, badRequest("output_config.format.type", "output_config.format must be of type json_schema, not %q", oc.Format.Type)
		}
		out.ResponseFormat = &openai.ResponseFormat{Type: "json_schema", JSONSchema: &openai.JSONSchema{Name: "output", Schema: oc.Format.Schema}}
	}
	if len(req.System) > 0 {
		text, err := anthropicText(req.System, "system")
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, openai.Message{Role: "system", Content: openai.Content(text)})
	}
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	for i, msg := range req.Messages {
		where := fmt.Sprintf("messages[%d]", i)
		switch msg.Role {
		case "user":
			var text strings.Builder
			for j, b := range msg.Content {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "tool_result":
					result, aerr := anthropicText(b.Content, fmt.Sprintf("%s.content[%d].content", where, j))
					if aerr != nil {
						return nil, aerr
					}
					if b.IsError {
						result = "Error: " + result
					}
					out.Messages = append(out.Messages, openai.Message{Role: "tool", Content: openai.Content(result), ToolCallID: b.ToolUseID})
				default:
					return nil, badRequest(fmt.Sprintf("%s.content[%d].type", where, j), "content blocks of type %q are not supported in a user message (text and tool_result are)", b.Type)
				}
			}
			if text.Len() > 0 || len(msg.Content) == 0 {
				out.Messages = append(out.Messages, openai.Message{Role: "user", Content: openai.Content(text.String())})
			}
		case "system":
			text, aerr := anthropicText(msg.Content, where+".content")
			if aerr != nil {
				return nil, aerr
			}
			out.Messages = append(out.Messages, openai.Message{Role: "system", Content: openai.Content(text)})
		case "assistant":
			reply := openai.Message{Role: "assistant"}
			var text strings.Builder
			for j, b := range msg.Content {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "thinking", "redacted_thinking":
					reply.ReasoningContent += b.Thinking
				case "tool_use":
					args := bytes.TrimSpace(b.Input)
					if len(args) == 0 {
						args = []byte("{}")
					}
					reply.ToolCalls = append(reply.ToolCalls, openai.ToolCall{ID: b.ID, Type: "function", Function: openai.FunctionCall{Name: b.Name, Arguments: string(args)}})
				default:
					return nil, badRequest(fmt.Sprintf("%s.content[%d].type", where, j), "content blocks of type %q are not supported in an assistant message", b.Type)
				}
			}
			reply.Content = openai.Content(text.String())
			out.Messages = append(out.Messages, reply)
		default:
			return nil, badRequest(where+".role", "role must be user, assistant or system, not %q", msg.Role)
		}
	}
	return out, nil
}

// anthropicText joins text blocks: a system prompt or a tool result.
func anthropicText(c anthropicContent, where string) (string, *apiError) {
	var b strings.Builder
	for i, blk := range c {
		if blk.Type != "text" {
			return "", badRequest(fmt.Sprintf("%s[%d].type", where, i), "only text blocks may appear here, not %q", blk.Type)
		}
		if i > 0 && where == "system" {
			b.WriteString("\n")
		}
		b.WriteString(blk.Text)
	}
	return b.String(), nil
}
