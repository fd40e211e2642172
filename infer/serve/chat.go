package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/grammar"
	"github.com/bonsai-chat/bonsai/infer/openai"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

// maxTopLogprobs is the most alternatives a token's logprobs list.
const maxTopLogprobs = 20

func (s *Server) chat(w http.ResponseWriter, r *http.Request, m *Model) {
	var req openai.ChatRequest
	if !s.decode(w, r, &req) {
		return
	}
	c, aerr := s.prepareChat(r.Context(), m, &req)
	if aerr != nil {
		aerr.write(w)
		return
	}
	if req.Stream {
		s.streamChat(w, r, m, &req, c)
		return
	}
	out := c.out
	var lps []openai.TokenLogprob
	o, aerr := run(r.Context(), m, c.prompt, c.gen, c.constraint, func(p piece) error {
		out.feed(p.text, false)
		if c.gen.logprobs {
			lps = append(lps, m.logprobs(p.toks)...)
		}
		return nil
	})
	if s.runFailed(w, r, o, aerr) {
		return
	}
	out.feed("", true)
	reply := openai.Reply{Role: "assistant", ReasoningContent: out.reasoning.String()}
	content := out.content.String()
	if len(out.calls) > 0 {
		content = strings.TrimSpace(content)
		for i, tc := range out.calls {
			reply.ToolCalls = append(reply.ToolCalls, wireCall(i, tc, false))
		}
	}
	if content != "" || len(out.calls) == 0 {
		reply.Content = &content
	}
	choice := openai.ChatChoice{Message: reply, FinishReason: finishReason(o.finish, out.calls)}
	if c.gen.logprobs {
		choice.Logprobs = &openai.Logprobs{Content: nonNil(lps)}
	}
	writeJSON(w, http.StatusOK, openai.ChatResponse{
		ID: c.id, Object: "chat.completion", Created: c.created, Model: m.ID,
		Choices: []openai.ChatChoice{choice}, Usage: usageOf(o.res), Timings: timingsOf(o.res),
	})
}

func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, m *Model, req *openai.ChatRequest, c *chatCall) {
	sse := openai.NewSSE(w)
	chunk := func(d openai.Delta, finish *string, lp *openai.Logprobs) openai.ChatChunk {
		return openai.ChatChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: m.ID,
			Choices: []openai.ChunkChoice{{Delta: d, FinishReason: finish, Logprobs: lp}}}
	}
	empty := ""
	if err := sse.Send(chunk(openai.Delta{Role: "assistant", Content: &empty}, nil, nil)); err != nil {
		return
	}
	out := c.out
	sent := 0 // tool calls sent
	send := func(reasoning, content string, lps []openai.TokenLogprob) error {
		var lp *openai.Logprobs
		if c.gen.logprobs && len(lps) > 0 {
			lp = &openai.Logprobs{Content: lps}
		}
		if reasoning != "" || content != "" || lp != nil {
			d := openai.Delta{}
			if reasoning != "" {
				d.ReasoningContent = &reasoning
			}
			if content != "" {
				d.Content = &content
			}
			if err := sse.Send(chunk(d, nil, lp)); err != nil {
				return err
			}
		}
		for ; sent < len(out.calls); sent++ {
			d := openai.Delta{ToolCalls: []openai.ToolCall{wireCall(sent, out.calls[sent], true)}}
			if err := sse.Send(chunk(d, nil, nil)); err != nil {
				return err
			}
		}
		return nil
	}
	o, aerr := run(r.Context(), m, c.prompt, c.gen, c.constraint, func(p piece) error {
		reasoning, content := out.feed(p.text, false)
		var lps []openai.TokenLogprob
		if c.gen.logprobs {
			lps = m.logprobs(p.toks)
		}
		return send(reasoning, content, lps)
	})
	if s.streamFailed(sse, r, o, aerr) {
		return
	}
	reasoning, content := out.feed("", true)
	if send(reasoning, content, nil) != nil {
		return
	}
	finish := finishReason(o.finish, out.calls)
	last := chunk(openai.Delta{}, &finish, nil)
	last.Timings = timingsOf(o.res)
	if sse.Send(last) != nil {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := openai.ChatChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: m.ID,
			Choices: []openai.ChunkChoice{}, Usage: usageOf(o.res)}
		if sse.Send(u) != nil {
			return
		}
	}
	sse.Done()
}

// chatCall is a checked chat request, ready to run.
type chatCall struct {
	id         string
	created    int64
	prompt     []int32
	gen        gen
	constraint slots.Constraint
	out        *chatOut
}

func (s *Server) prepareChat(ctx context.Context, m *Model, req *openai.ChatRequest) (*chatCall, *apiError) {
	// Any model name gets the loaded model, as from llama-server: clients
	// configured with a fixed name ("gpt-4o") work unchanged. The reply's
	// model field says which model answered (m.ID).
	if n := leastTokens(req, m.maxPiece); n >= m.Sched.Context() {
		return nil, tooLong(n, m)
	}
	g, aerr := settings(m, knobs{
		maxTokens: req.MaxTokens, maxCompletion: req.MaxCompletionTokens, temperature: req.Temperature, topP: req.TopP,
		minP: req.MinP, topK: req.TopK, repeatLastN: req.RepeatLastN, seed: req.Seed, stop: req.Stop,
		presence: req.PresencePenalty, frequency: req.FrequencyPenalty, repeatP: req.RepeatPenalty, n: req.N,
	})
	if aerr != nil {
		return nil, aerr
	}
	if req.TopLogprobs != nil {
		if *req.TopLogprobs < 0 || *req.TopLogprobs > maxTopLogprobs {
			return nil, badRequest("top_logprobs", "top_logprobs must be between 0 and %d", maxTopLogprobs)
		}
		if *req.TopLogprobs > 0 && !req.Logprobs {
			return nil, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
		}
		g.top = *req.TopLogprobs
	}
	g.logprobs = req.Logprobs
	if req.IgnoreEOS {
		g.ban = m.endIDs
	}
	think := false
	if k := req.ChatTemplateKwargs; k != nil && k.EnableThinking != nil {
		think = *k.EnableThinking
	}
	mode, forced, aerr := toolChoice(req.Tools, req.ToolChoice)
	if aerr != nil {
		return nil, aerr
	}
	tools := req.Tools
	if mode == "none" {
		tools = nil
	}
	var machine *grammar.Machine
	if rf := req.ResponseFormat; rf != nil && rf.Type != "text" && rf.Type != "" {
		if mode == "required" {
			return nil, badRequest("response_format", "response_format and a required tool call cannot both constrain the reply")
		}
		sch, aerr := responseSchema(rf)
		if aerr != nil {
			return nil, aerr
		}
		machine = grammar.NewMachine(sch)
	}
	if mode == "required" {
		machine = toolMachine(tools, forced)
	}
	c := &chatCall{id: newID("chatcmpl-"), created: time.Now().Unix(), gen: g}
	if machine != nil {
		think = false // the reply is the constrained text itself
		c.constraint = grammar.NewConstraint(m.grammarVocab(), machine)
	}
	release, aerr := s.tokenizing(ctx)
	if aerr != nil {
		return nil, aerr
	}
	defer release()
	msgs, aerr := convertMessages(req.Messages, tools)
	if aerr != nil {
		return nil, aerr
	}
	if c.prompt, aerr = m.encodePrompt(msgs, think); aerr != nil {
		return nil, aerr
	}
	c.gen.own = len(c.prompt) - m.generationPromptTokens(think)
	c.out = &chatOut{}
	if machine == nil {
		c.out.think = chat.NewThinkParser(opensThinking(m.Tmpl.Pieces(nil, true, think)))
	}
	if len(tools) > 0 {
		c.out.tools = &toolParser{}
	}
	return c, nil
}

// encodePrompt tokenizes the conversation with the template, the BOS
// first where the model wants one. Once the tokens pass the context the
// rest is not tokenized: the request is refused either way.
func (m *Model) encodePrompt(msgs []chat.Message, think bool) ([]int32, *apiError) {
	n := 0
	encode := func(text string, special bool) []int32 {
		if n >= m.Sched.Context() {
			n += 1
			return nil
		}
		ids := m.Tok.Encode(text, special)
		n += len(ids)
		return ids
	}
	prompt := m.Tmpl.Encode(msgs, true, think, encode)
	if m.Tok.AddBOS() && m.Tok.BOS() >= 0 {
		prompt = append([]int32{m.Tok.BOS()}, prompt...)
	}
	if n >= m.Sched.Context() {
		return nil, tooLong(n, m)
	}
	return prompt, nil
}

// generationPromptTokens is how many tokens the template's generation
// prompt ("<|im_start|>assistant\n…") adds after the messages.
func (m *Model) generationPromptTokens(think bool) int {
	all, msgs := m.Tmpl.Pieces(nil, true, think), m.Tmpl.Pieces(nil, false, think)
	n := 0
	for _, p := range all[len(msgs):] {
		n += len(m.Tok.Encode(p.Text, p.Special))
	}
	return n
}

// opensThinking says the generation prompt ends inside a <think> block
// (the reply starts with reasoning).
func opensThinking(gen []chat.Piece) bool {
	var b strings.Builder
	for _, p := range gen {
		b.WriteString(p.Text)
	}
	return strings.HasSuffix(strings.TrimRight(b.String(), "\n"), chat.ThinkOpen)
}

// toolChoice reads tool_choice: "none", "auto" (the default with tools),
// "required", or a named function (forced, which is "required" of that
// one).
func toolChoice(tools []openai.Tool, raw json.RawMessage) (mode, forced string, _ *apiError) {
	for i, t := range tools {
		if t.Type != "" && t.Type != "function" {
			return "", "", badRequest(fmt.Sprintf("tools[%d].type", i), "tools must be of type function, not %q", t.Type)
		}
		if t.Function.Name == "" {
			return "", "", badRequest(fmt.Sprintf("tools[%d].function.name", i), "a tool needs a name")
		}
	}
	mode = "auto"
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		if len(tools) == 0 {
			mode = "none"
		}
		return mode, "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none", "auto", "required":
		default:
			return "", "", badRequest("tool_choice", "tool_choice must be none, auto, required or a function, not %q", s)
		}
		if s != "none" && len(tools) == 0 {
			return "", "", badRequest("tool_choice", "tool_choice %q without tools", s)
		}
		return s, "", nil
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" {
		return "", "", badRequest("tool_choice", "tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": …}}")
	}
	if !slices.ContainsFunc(tools, func(t openai.Tool) bool { return t.Function.Name == named.Function.Name }) {
		return "", "", badRequest("tool_choice", "tool_choice names %q, which is not among the tools", named.Function.Name)
	}
	return "required", named.Function.Name, nil
}

// toolMachine constrains the reply to one call in Qwen3's markup, of the
// forced function or any of the tools. The arguments follow the function's
// schema where there is one function and its schema is in the subset
// infer/grammar enforces; otherwise they are any JSON object.
func toolMachine(tools []openai.Tool, forced string) *grammar.Machine {
	var names []string
	var params json.RawMessage
	for _, t := range tools {
		if forced == "" || t.Function.Name == forced {
			names = append(names, t.Function.Name)
			params = t.Function.Parameters
		}
	}
	if len(names) != 1 || len(bytes.TrimSpace(params)) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	nameEnum, _ := json.Marshal(names)
	schema := func(args json.RawMessage) []byte {
		return []byte(`{"type":"object","properties":{"name":{"enum":` + string(nameEnum) + `},"arguments":` + string(args) + `},"required":["name","arguments"]}`)
	}
	sch, err := grammar.Compile(schema(params))
	if err != nil {
		sch, _ = grammar.Compile(schema(json.RawMessage(`{"type":"object"}`)))
	}
	return grammar.NewWrapped(toolOpen+"\n", sch, "\n"+toolClose)
}

func responseSchema(rf *openai.ResponseFormat) (*grammar.Schema, *apiError) {
	switch rf.Type {
	case "json_object":
		return grammar.AnyObject(), nil
	case "json_schema":
		if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
			return nil, badRequest("response_format.json_schema", "json_schema needs a schema")
		}
		sch, err := grammar.Compile(rf.JSONSchema.Schema)
		if err != nil {
			aerr := badRequest("response_format.json_schema.schema", "%v", err)
			if errors.Is(err, grammar.ErrUnsupported) {
				aerr.code = "unsupported_schema"
			}
			return nil, aerr
		}
		return sch, nil
	}
	return nil, badRequest("response_format.type", "response_format must be text, json_object or json_schema, not %q", rf.Type)
}

// convertMessages turns the API's messages into the template's, the way
// Qwen3's template writes tools: their signatures in the system turn, the
// assistant's calls as <tool_call> blocks, and each run of tool results as
// one user turn of <tool_response> blocks. Its cost is linear in the
// messages' bytes (a run of 50,000 tool results joined with += took 20 s).
func convertMessages(in []openai.Message, tools []openai.Tool) ([]chat.Message, *apiError) {
	if len(in) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	block := toolsBlock(tools)
	var out []chat.Message
	var results strings.Builder // the run of tool results in hand
	flush := func() {
		if results.Len() > 0 {
			out = append(out, chat.Message{Role: chat.RoleUser, Content: results.String()})
			results.Reset()
		}
	}
	for i, msg := range in {
		content := string(msg.Content)
		if msg.Role != "tool" {
			flush()
		}
		switch msg.Role {
		case "system", "developer":
			if i == 0 && block != "" {
				content += "\n\n" + block
				block = ""
			}
			out = append(out, chat.Message{Role: chat.RoleSystem, Content: content})
		case "user":
			out = append(out, chat.Message{Role: chat.RoleUser, Content: content})
		case "assistant":
			out = append(out, chat.Message{Role: chat.RoleAssistant, Content: withCalls(content, msg.ToolCalls), Thinking: msg.ReasoningContent})
		case "tool":
			if results.Len() > 0 {
				results.WriteString("\n")
			}
			results.WriteString("<tool_response>\n" + content + "\n</tool_response>")
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "role must be system, user, assistant or tool, not %q", msg.Role)
		}
	}
	flush()
	if block != "" {
		out = append([]chat.Message{{Role: chat.RoleSystem, Content: block}}, out...)
	}
	return out, nil
}

// withCalls is an assistant turn's content followed by its tool calls as
// <tool_call> blocks.
func withCalls(content string, calls []openai.ToolCall) string {
	if len(calls) == 0 {
		return content
	}
	var b strings.Builder
	b.WriteString(content)
	for j, tc := range calls {
		if content != "" || j > 0 {
			b.WriteString("\n")
		}
		args := tc.Function.Arguments
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		name, _ := json.Marshal(tc.Function.Name)
		b.WriteString(toolOpen + "\n{\"name\": " + string(name) + ", \"arguments\": " + args + "}\n" + toolClose)
	}
	return b.String()
}

// leastTokens is a floor under the tokens the request's prompt takes,
// found without tokenizing: every message, tool call and tool is at least
// one token, and no token spells more than maxPiece bytes. A request over
// the context by this count is refused before any work on its text.
func leastTokens(req *openai.ChatRequest, maxPiece int) int {
	units, bytes := len(req.Tools), 0
	for _, t := range req.Tools {
		bytes += len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
	}
	for _, msg := range req.Messages {
		units += 1 + len(msg.ToolCalls)
		bytes += len(msg.Content) + len(msg.ReasoningContent)
		for _, tc := range msg.ToolCalls {
			bytes += len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	return max(units, bytes/maxPiece)
}

// toolsBlock is the system prompt's tool section of Qwen3's template.
func toolsBlock(tools []openai.Tool) string {
	if len(tools) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
	for _, t := range tools {
		b.WriteString("\n")
		b.WriteString(toolJSON(t))
	}
	b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
		"<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
	return b.String()
}

// toolJSON writes a tool as the template's tojson does: Python's
// json.dumps, with ", " and ": " between items.
func toolJSON(t openai.Tool) string {
	var fn bytes.Buffer
	fn.WriteString(`{"name":`)
	name, _ := json.Marshal(t.Function.Name)
	fn.Write(name)
	if t.Function.Description != "" {
		d, _ := json.Marshal(t.Function.Description)
		fn.WriteString(`,"description":`)
		fn.Write(d)
	}
	if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 {
		fn.WriteString(`,"parameters":`)
		fn.Write(p)
	}
	fn.WriteString("}")
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(`{"type":"function","function":`+fn.String()+`}`)); err != nil {
		return fn.String()
	}
	return pythonSpacing(compact.Bytes())
}

func pythonSpacing(compact []byte) string {
	var b strings.Builder
	inStr, esc := false, false
	for _, c := range compact {
		b.WriteByte(c)
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ',' || c == ':'):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// chatOut splits the generated text into reasoning, answer and tool calls.
type chatOut struct {
	think              *chat.ThinkParser // nil: the reply is constrained, no reasoning
	tools              *toolParser       // nil: no tools offered
	content, reasoning strings.Builder
	calls              []toolCall
}

// feed takes the next text (end: the generation is over) and returns the
// reasoning and answer text it decided; new tool calls join calls.
func (o *chatOut) feed(text string, end bool) (reasoning, content string) {
	var segs []chat.Segment
	if o.think != nil {
		segs = o.think.Feed(text)
		if end {
			segs = append(segs, o.think.Flush()...)
		}
	} else {
		segs = []chat.Segment{{Text: text}}
	}
	var rb, cb strings.Builder
	for _, s := range segs {
		if s.Thinking {
			rb.WriteString(s.Text)
			continue
		}
		t := s.Text
		if o.tools != nil {
			var calls []toolCall
			t, calls = o.tools.feed(t)
			o.calls = append(o.calls, calls...)
		}
		cb.WriteString(t)
	}
	if end && o.tools != nil {
		t, calls := o.tools.flush()
		o.calls = append(o.calls, calls...)
		cb.WriteString(t)
	}
	o.reasoning.WriteString(rb.String())
	o.content.WriteString(cb.String())
	return rb.String(), cb.String()
}

func wireCall(i int, c toolCall, indexed bool) openai.ToolCall {
	tc := openai.ToolCall{ID: newID("call_"), Type: "function", Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}}
	if indexed {
		tc.Index = &i
	}
	return tc
}

func finishReason(finish string, calls []toolCall) string {
	if finish == "stop" && len(calls) > 0 {
		return "tool_calls"
	}
	return finish
}

// logprobs are the API's entries for the sampled tokens (an end token
// has none: it is not part of the text).
func (m *Model) logprobs(toks []slots.Token) []openai.TokenLogprob {
	var out []openai.TokenLogprob
	for _, t := range toks {
		if m.isEnd(t.ID) {
			continue
		}
		p := m.Tok.Piece(t.ID)
		e := openai.TokenLogprob{Token: p, Logprob: t.Logprob, Bytes: byteList(p), TopLogprobs: []openai.TopLogprob{}}
		for _, alt := range t.Top {
			ap := m.Tok.Piece(alt.ID)
			e.TopLogprobs = append(e.TopLogprobs, openai.TopLogprob{Token: ap, Logprob: alt.Logit, Bytes: byteList(ap)})
		}
		out = append(out, e)
	}
	return out
}

func byteList(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// usageOf is a generation's usage. Its cached tokens are those of the
// same conversation's earlier turns only (slots.Result.Resumed): a hit on
// another client's prompt is not told.
func usageOf(r slots.Result) *openai.Usage {
	return &openai.Usage{PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
		TotalTokens: r.PromptTokens + r.CompletionTokens, PromptTokensDetails: &openai.PromptDetails{CachedTokens: r.Resumed}}
}

// timingsOf are llama-server's timings of a generation: the prompt's time
// is from submission to the first token, queueing excluded.
func timingsOf(r slots.Result) *openai.Timings {
	t := &openai.Timings{PromptN: r.PromptTokens - r.Resumed, CacheN: r.Resumed, PredictedN: r.CompletionTokens,
		DraftN: r.Drafted, DraftNAccepted: r.Accepted}
	prompt := r.TTFT - r.Queued
	t.PromptMS = float64(prompt.Microseconds()) / 1000
	t.PredictedMS = float64(r.Decode.Microseconds()) / 1000
	if prompt > 0 {
		t.PromptPerSecond = float64(t.PromptN) / prompt.Seconds()
	}
	if r.Decode > 0 && r.CompletionTokens > 1 {
		t.PredictedPerSecond = float64(r.CompletionTokens-1) / r.Decode.Seconds()
	}
	return t
}
