// Package openai holds the wire types of the OpenAI HTTP API as bonsai
// serves it (infer/serve) and talks to other servers (infer/remote), and
// the server-sent events that stream them. Only the fields bonsai reads or
// writes are here; unknown fields are ignored when decoding.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ChatRequest is POST /v1/chat/completions.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float32        `json:"temperature,omitempty"`
	TopP                *float32        `json:"top_p,omitempty"`
	TopK                *int            `json:"top_k,omitempty"`
	MinP                *float32        `json:"min_p,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stop                Strings         `json:"stop,omitempty"`
	PresencePenalty     *float32        `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float32        `json:"frequency_penalty,omitempty"`
	RepeatPenalty       *float32        `json:"repeat_penalty,omitempty"`
	RepeatLastN         *int            `json:"repeat_last_n,omitempty"`
	Logprobs            bool            `json:"logprobs,omitempty"`
	TopLogprobs         *int            `json:"top_logprobs,omitempty"`
	N                   *int            `json:"n,omitempty"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	ResponseFormat      *ResponseFormat `json:"response_format,omitempty"`
	ChatTemplateKwargs  *TemplateKwargs `json:"chat_template_kwargs,omitempty"`
	IgnoreEOS           bool            `json:"ignore_eos,omitempty"`
	LogitBias           json.RawMessage `json:"logit_bias,omitempty"`
	// JSONSchema and Grammar are llama-server's constraints beside
	// response_format.
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
	Grammar    string          `json:"grammar,omitempty"`
}

// TemplateKwargs are the chat template's switches (llama-server, vLLM).
type TemplateKwargs struct {
	EnableThinking *bool `json:"enable_thinking,omitempty"`
}

// StreamOptions: IncludeUsage asks for a last chunk with the usage.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one turn. Content may be a string, an array of text parts or
// null on the wire; Content holds the text.
type Message struct {
	Role             string     `json:"role"`
	Content          Content    `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
}

// Content is a message's text: a JSON string, null, or an array of
// {"type": "text", "text": …} parts (joined).
type Content string

// DecodeStringOr decodes b, a JSON value that may be a string standing for
// a longer form (one text for its array, one message for a conversation):
// null calls null, a string calls str, and anything else calls other with
// b, its surrounding space trimmed.
func DecodeStringOr(b []byte, null func(), str func(string), other func(b []byte) error) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		null()
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		str(s)
		return nil
	}
	return other(b)
}

func (c *Content) UnmarshalJSON(b []byte) error {
	return DecodeStringOr(b, func() { *c = "" }, func(s string) { *c = Content(s) }, c.decodeParts)
}

// decodeParts decodes an array of text parts into c (joined).
func (c *Content) decodeParts(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var s strings.Builder // not +=: a message of many parts would cost their square
		for _, p := range parts {
			if p.Type != "text" {
				return fmt.Errorf("%w: content part of type %q (only text is supported)", ErrUnsupportedContent, p.Type)
			}
			s.WriteString(p.Text)
		}
		*c = Content(s.String())
		return nil
	}
	return fmt.Errorf("content must be a string, an array of parts or null")
}

// ErrUnsupportedContent is a content part bonsai cannot read (an image).
var ErrUnsupportedContent = errors.New("unsupported content")

// Strings is a string or an array of strings on the wire (stop).
type Strings []string

func (s *Strings) UnmarshalJSON(b []byte) error {
	return DecodeStringOr(b, func() { *s = nil }, func(one string) { *s = Strings{one} }, func(b []byte) error {
		var many []string
		if err := json.Unmarshal(b, &many); err != nil {
			return fmt.Errorf("must be a string or an array of strings")
		}
		*s = many
		return nil
	})
}

// Prompt is one prompt of a completion request: a text, or token ids.
type Prompt struct {
	Text   string
	Tokens []int32
}

// Prompts are /v1/completions' prompt on the wire: a string, an array of
// strings, an array of token ids, or an array of arrays of token ids.
type Prompts []Prompt

func (p *Prompts) UnmarshalJSON(b []byte) error {
	return DecodeStringOr(b, func() { *p = nil }, func(one string) { *p = Prompts{{Text: one}} }, p.decodeArray)
}

// decodeArray decodes an array of prompts, or of one prompt's token ids,
// into p.
func (p *Prompts) decodeArray(b []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return errPrompt
	}
	var ids []int32
	out := Prompts{}
	for _, it := range items {
		it = bytes.TrimSpace(it)
		switch {
		case len(it) > 0 && it[0] == '"':
			var s string
			if err := json.Unmarshal(it, &s); err != nil {
				return errPrompt
			}
			out = append(out, Prompt{Text: s})
		case len(it) > 0 && it[0] == '[':
			var toks []int32
			if err := json.Unmarshal(it, &toks); err != nil {
				return errPrompt
			}
			out = append(out, Prompt{Tokens: toks})
		default:
			var id int32
			if err := json.Unmarshal(it, &id); err != nil {
				return errPrompt
			}
			ids = append(ids, id)
		}
	}
	if ids != nil {
		if len(out) > 0 {
			return errPrompt
		}
		out = Prompts{{Tokens: ids}}
	}
	*p = out
	return nil
}

var errPrompt = errors.New("must be a string, an array of strings, an array of token ids or an array of arrays of token ids")

// Tool is a function the model may call.
type Tool struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a tool: Parameters is its arguments' JSON schema.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ToolCall is a call the model made. In a streamed delta Index says which
// call a fragment belongs to.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a call's function and its arguments as a JSON text.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ResponseFormat is "text", "json_object" or "json_schema".
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
	// Schema is llama-server's short form: {"type": "json_schema" or
	// "json_object", "schema": {…}}.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// JSONSchema is response_format's named schema.
type JSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict *bool           `json:"strict,omitempty"`
}

// ChatResponse is a non-streamed reply.
type ChatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"` // "chat.completion"
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	Choices           []ChatChoice `json:"choices"`
	Usage             *Usage       `json:"usage,omitempty"`
	Timings           *Timings     `json:"timings,omitempty"`
}

// ChatChoice is one reply of a ChatResponse.
type ChatChoice struct {
	Index        int       `json:"index"`
	Message      Reply     `json:"message"`
	FinishReason string    `json:"finish_reason"`
	Logprobs     *Logprobs `json:"logprobs"`
}

// Reply is the assistant's message in a response (content null when the
// reply is only tool calls).
type Reply struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ChatChunk is one streamed event of a reply.
type ChatChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"` // "chat.completion.chunk"
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint,omitempty"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *Usage        `json:"usage,omitempty"`
	Timings           *Timings      `json:"timings,omitempty"`
}

// ChunkChoice is a chunk's piece of the reply.
type ChunkChoice struct {
	Index        int       `json:"index"`
	Delta        Delta     `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
	Logprobs     *Logprobs `json:"logprobs,omitempty"`
}

// Delta is what a chunk adds.
type Delta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// Logprobs are the chat reply's per-token log-probabilities.
type Logprobs struct {
	Content []TokenLogprob `json:"content"`
}

// TokenLogprob is one token's.
type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float32      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is an alternative token's.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// Usage counts a request's tokens.
type Usage struct {
	PromptTokens        int            `json:"prompt_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	TotalTokens         int            `json:"total_tokens"`
	PromptTokensDetails *PromptDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptDetails: CachedTokens came from the prompt cache.
type PromptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Timings are llama-server's per-request measurements, which bonsai also
// sends.
type Timings struct {
	PromptN            int     `json:"prompt_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
	CacheN             int     `json:"cache_n"`
	// DraftN and DraftNAccepted count speculative drafts, as llama-server
	// reports them when it speculates.
	DraftN         int `json:"draft_n,omitempty"`
	DraftNAccepted int `json:"draft_n_accepted,omitempty"`
}

// CompletionRequest is POST /v1/completions.
type CompletionRequest struct {
	Model            string          `json:"model"`
	Prompt           Prompts         `json:"prompt"`
	Stream           bool            `json:"stream"`
	StreamOptions    *StreamOptions  `json:"stream_options,omitempty"`
	MaxTokens        *int            `json:"max_tokens,omitempty"`
	Temperature      *float32        `json:"temperature,omitempty"`
	TopP             *float32        `json:"top_p,omitempty"`
	TopK             *int            `json:"top_k,omitempty"`
	MinP             *float32        `json:"min_p,omitempty"`
	Seed             *int64          `json:"seed,omitempty"`
	Stop             Strings         `json:"stop,omitempty"`
	PresencePenalty  *float32        `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float32        `json:"frequency_penalty,omitempty"`
	RepeatPenalty    *float32        `json:"repeat_penalty,omitempty"`
	RepeatLastN      *int            `json:"repeat_last_n,omitempty"`
	Logprobs         *int            `json:"logprobs,omitempty"`
	N                *int            `json:"n,omitempty"`
	Echo             bool            `json:"echo,omitempty"`
	IgnoreEOS        bool            `json:"ignore_eos,omitempty"`
	LogitBias        json.RawMessage `json:"logit_bias,omitempty"`
	JSONSchema       json.RawMessage `json:"json_schema,omitempty"`
	Grammar          string          `json:"grammar,omitempty"`
	ResponseFormat   *ResponseFormat `json:"response_format,omitempty"`
}

// CompletionResponse is a non-streamed completion, and a streamed chunk.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"` // "text_completion"
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
	Timings *Timings           `json:"timings,omitempty"`
}

// CompletionChoice is a completion's text.
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	FinishReason *string             `json:"finish_reason"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
}

// CompletionLogprobs are the legacy completions' log-probabilities.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// ModelList is GET /v1/models.
type ModelList struct {
	Object string  `json:"object"` // "list"
	Data   []Model `json:"data"`
}

// Model is one served model. Beside OpenAI's fields it says its context
// size the ways llama-server (meta.n_ctx) and vLLM (max_model_len) do.
type Model struct {
	ID          string     `json:"id"`
	Object      string     `json:"object"` // "model"
	Created     int64      `json:"created"`
	OwnedBy     string     `json:"owned_by"`
	MaxModelLen int        `json:"max_model_len,omitempty"`
	Meta        *ModelMeta `json:"meta,omitempty"`
}

// ModelMeta is llama-server's description of a model.
type ModelMeta struct {
	NCtx      int   `json:"n_ctx,omitempty"`
	NCtxTrain int   `json:"n_ctx_train,omitempty"`
	NVocab    int   `json:"n_vocab,omitempty"`
	NParams   int64 `json:"n_params,omitempty"`
	Size      int64 `json:"size,omitempty"`
}

// ErrorResponse is the body of every error.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what went wrong: Type is "invalid_request_error",
// "authentication_error", "not_found_error", "server_error", …
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
