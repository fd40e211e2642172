package remote

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/openai"
)

// Protocol is the API a server is spoken to in: OpenAI's Chat Completions
// (every server), OpenAI's Responses, or Anthropic's Messages (which
// llama-server and bonsai serve also offer). The base URL is the same for
// all three (…/v1): the model list is read from its /models.
type Protocol string

const (
	ChatCompletions Protocol = "chat"      // POST /chat/completions
	Responses       Protocol = "responses" // POST /responses
	Messages        Protocol = "anthropic" // POST /messages
)

// ParseProtocol reads a protocol's name; "" is ChatCompletions.
func ParseProtocol(s string) (Protocol, error) {
	switch p := Protocol(strings.ToLower(strings.TrimSpace(s))); p {
	case "", ChatCompletions, "openai":
		return ChatCompletions, nil
	case Responses, Messages:
		return p, nil
	case "messages":
		return Messages, nil
	}
	return "", fmt.Errorf("remote: unknown protocol %q: chat, responses or anthropic", s)
}

// anthropicVersion is the Messages API version asked for.
const anthropicVersion = "2023-06-01"

// defaultMaxTokens is max_tokens for Anthropic's API, which requires one,
// when the request sets none.
const defaultMaxTokens = 4096

// path is the reply route of the engine's protocol.
func (e *Engine) path() string {
	switch e.opts.Protocol {
	case Responses:
		return "/responses"
	case Messages:
		return "/messages"
	}
	return "/chat/completions"
}

// streamEvent is one event of a reply stream in any protocol's terms.
type streamEvent struct {
	reasoning, content string
	finish             string // "stop", "length", or "" while the reply goes on
	usage              *openai.Usage
	reply              bool // the event is part of the reply (stats follow it)
	end                bool // the stream's last event
}

// decodeEvent reads a stream event of the engine's protocol.
func (e *Engine) decodeEvent(data string) (streamEvent, error) {
	switch e.opts.Protocol {
	case Responses:
		return decodeResponsesEvent(data)
	case Messages:
		return decodeMessagesEvent(data)
	}
	if data == "[DONE]" {
		return streamEvent{end: true}, nil
	}
	var chunk streamChunk
	if err := json.Unmarshal([]byte(data), &chunk); err != nil {
		return streamEvent{}, fmt.Errorf("%w: a stream event is not JSON: %.200s", ErrServer, data)
	}
	if chunk.Error != nil {
		return streamEvent{}, fmt.Errorf("%w: %s", ErrServer, clip(chunk.Error.message()))
	}
	var ev streamEvent
	for _, c := range chunk.Choices {
		ev.reasoning += c.Delta.ReasoningContent + c.Delta.Reasoning
		ev.content += c.Delta.Content
		if c.FinishReason != nil && *c.FinishReason != "" {
			ev.finish = *c.FinishReason
			if ev.finish != "length" {
				ev.finish = "stop"
			}
		}
	}
	ev.usage, ev.reply = chunk.Usage, len(chunk.Choices) > 0
	return ev, nil
}

func decodeResponsesEvent(data string) (streamEvent, error) {
	var v struct {
		Type     string `json:"type"`
		Delta    string `json:"delta"`
		Message  string `json:"message"`
		Response *struct {
			Status            string `json:"status"`
			IncompleteDetails *struct {
				Reason string `json:"reason"`
			} `json:"incomplete_details"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
			Usage *struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
				TotalTokens  int `json:"total_tokens"`
			} `json:"usage"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return streamEvent{}, fmt.Errorf("%w: a stream event is not JSON: %.200s", ErrServer, data)
	}
	var ev streamEvent
	switch v.Type {
	case "response.output_text.delta":
		ev.content, ev.reply = v.Delta, true
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		ev.reasoning, ev.reply = v.Delta, true
	case "error":
		return ev, fmt.Errorf("%w: %s", ErrServer, clip(v.Message))
	case "response.failed":
		msg := "the response failed"
		if v.Response != nil && v.Response.Error != nil {
			msg = v.Response.Error.Message
		}
		return ev, fmt.Errorf("%w: %s", ErrServer, clip(msg))
	case "response.completed", "response.incomplete":
		ev.finish, ev.end, ev.reply = "stop", true, true
		if r := v.Response; r != nil {
			if r.Status == "incomplete" && (r.IncompleteDetails == nil || r.IncompleteDetails.Reason == "max_output_tokens") {
				ev.finish = "length"
			}
			if u := r.Usage; u != nil {
				ev.usage = &openai.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
			}
		}
	}
	return ev, nil
}

func decodeMessagesEvent(data string) (streamEvent, error) {
	var v struct {
		Type  string `json:"type"`
		Delta struct {
			Type       string `json:"type"`
			Text       string `json:"text"`
			Thinking   string `json:"thinking"`
			StopReason string `json:"stop_reason"`
		} `json:"delta"`
		Message *struct {
			Usage anthropicUsage `json:"usage"`
		} `json:"message"`
		Usage *anthropicUsage `json:"usage"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return streamEvent{}, fmt.Errorf("%w: a stream event is not JSON: %.200s", ErrServer, data)
	}
	var ev streamEvent
	switch v.Type {
	case "message_start":
		if v.Message != nil {
			ev.usage = v.Message.Usage.openai()
		}
	case "content_block_delta":
		switch v.Delta.Type {
		case "text_delta":
			ev.content, ev.reply = v.Delta.Text, true
		case "thinking_delta":
			ev.reasoning, ev.reply = v.Delta.Thinking, true
		}
	case "message_delta":
		ev.finish, ev.reply = "stop", true
		if v.Delta.StopReason == "max_tokens" {
			ev.finish = "length"
		}
		if v.Usage != nil {
			ev.usage = v.Usage.openai()
		}
	case "message_stop":
		ev.end = true
	case "error":
		msg := "the server reported an error"
		if v.Error != nil {
			msg = v.Error.Message
		}
		return ev, fmt.Errorf("%w: %s", ErrServer, clip(msg))
	}
	return ev, nil
}

// anthropicUsage is Anthropic's usage: the prompt's tokens are those read
// from the cache and the others (input_tokens); a message_delta may carry
// only output_tokens (llama-server's does).
type anthropicUsage struct {
	InputTokens          int `json:"input_tokens"`
	CacheReadInputTokens int `json:"cache_read_input_tokens"`
	CacheCreation        int `json:"cache_creation_input_tokens"`
	OutputTokens         int `json:"output_tokens"`
}

// openai is the usage in OpenAI's terms; TotalTokens only when the prompt
// is known.
func (u anthropicUsage) openai() *openai.Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreation
	o := &openai.Usage{PromptTokens: prompt, CompletionTokens: u.OutputTokens}
	if prompt > 0 {
		o.TotalTokens = prompt + u.OutputTokens
	}
	return o
}

// requestBodyFor is the request of r in the engine's protocol.
func (e *Engine) requestBodyFor(r engine.GenerateRequest) ([]byte, error) {
	if e.opts.Protocol == "" || e.opts.Protocol == ChatCompletions {
		return e.requestBody(r)
	}
	if r.Raw != "" {
		return nil, fmt.Errorf("a remote backend takes conversations, not raw prompts: drop --raw")
	}
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var system []string
	var msgs []message
	for _, m := range r.Messages {
		if m.Role == "system" && e.opts.Protocol == Messages {
			system = append(system, m.Content)
			continue
		}
		msgs = append(msgs, message{Role: m.Role, Content: m.Content})
	}
	body := map[string]any{"model": e.model, "stream": true}
	if e.opts.Protocol == Messages {
		body["messages"] = msgs
		if len(system) > 0 {
			body["system"] = strings.Join(system, "\n\n")
		}
		body["max_tokens"] = defaultMaxTokens
		if r.MaxTokens > 0 {
			body["max_tokens"] = r.MaxTokens
		}
		if r.Think {
			// Anthropic's smallest budget; a server that thinks without
			// one (llama-server, bonsai) reads only the switch.
			body["thinking"] = map[string]any{"type": "enabled", "budget_tokens": 1024}
		}
	} else {
		body["input"], body["store"] = msgs, false
		if r.MaxTokens > 0 {
			body["max_output_tokens"] = r.MaxTokens
		}
		if r.Think {
			body["reasoning"] = map[string]string{"effort": "medium"}
		}
	}
	if s := r.Sampling; s != nil {
		body["temperature"] = s.Temperature
		if s.TopP > 0 && s.TopP < 1 {
			body["top_p"] = s.TopP
		}
		if s.TopK > 0 && e.opts.Protocol == Messages {
			body["top_k"] = s.TopK
		}
	}
	return json.Marshal(body)
}

// protocolHeaders sets what the protocol's servers want beside the body:
// Anthropic's key header and API version.
func (e *Engine) protocolHeaders(req *http.Request) {
	if e.opts.Protocol != Messages {
		return
	}
	req.Header.Set("anthropic-version", anthropicVersion)
	if e.opts.APIKey != "" {
		req.Header.Del("Authorization")
		req.Header.Set("x-api-key", e.opts.APIKey)
	}
}
