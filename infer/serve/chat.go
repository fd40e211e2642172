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
	"sync"
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
	// The n choices are n generations, side by side in the slots.
	choices := make([]openai.ChatChoice, c.gen.n)
	outcomes := make([]outcome, c.gen.n)
	aerrs := make([]*apiError, c.gen.n)
	var wg sync.WaitGroup
	for i := range c.gen.n {
		wg.Go(func() {
			out := c.newOut()
			var lps []openai.TokenLogprob
			o, aerr := run(r.Context(), m, c.prompt, c.choiceGen(i), c.newConstraint(m), func(p piece) error {
				out.feed(p.text, false)
				if c.gen.logprobs {
					lps = append(lps, m.logprobs(p.toks)...)
				}
				return nil
			})
			outcomes[i], aerrs[i] = o, aerr
			if aerr != nil || o.err != nil {
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
			choices[i] = openai.ChatChoice{Index: i, Message: reply, FinishReason: finishReason(o.finish, out.calls)}
			if c.gen.logprobs {
				choices[i].Logprobs = &openai.Logprobs{Content: nonNil(lps)}
			}
		})
	}
	wg.Wait()
	for i := range outcomes {
		if s.runFailed(w, r, outcomes[i], aerrs[i]) {
			return
		}
	}
	writeJSON(w, http.StatusOK, openai.ChatResponse{
		ID: c.id, Object: "chat.completion", Created: c.created, Model: m.ID,
		Choices: choices, Usage: usageOfAll(outcomes), Timings: timingsOf(outcomes[0].res),
	})
}

// usageOfAll is the usage of n choices of one prompt: the prompt counted
// once, the completions together.
func usageOfAll(os []outcome) *openai.Usage {
	u := usageOf(os[0].res)
	for _, o := range os[1:] {
		u.CompletionTokens += o.res.CompletionTokens
		u.TotalTokens += o.res.CompletionTokens
	}
	return u
}

// lockedSSE sends the events of several choices' generations, one at a
// time.
type lockedSSE struct {
	mu  sync.Mutex
	sse *openai.SSE
}

func (l *lockedSSE) Send(v any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sse.Send(v)
}

func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, m *Model, req *openai.ChatRequest, c *chatCall) {
	sse := &lockedSSE{sse: openai.NewSSE(w)}
	outcomes := make([]outcome, c.gen.n)
	aerrs := make([]*apiError, c.gen.n)
	var wg sync.WaitGroup
	for i := range c.gen.n {
		wg.Go(func() { outcomes[i], aerrs[i] = s.streamChoice(sse, r, m, c, i) })
	}
	wg.Wait()
	for i := range outcomes {
		if s.streamFailed(sse.sse, r, outcomes[i], aerrs[i]) {
			return
		}
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := openai.ChatChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: m.ID,
			Choices: []openai.ChunkChoice{}, Usage: usageOfAll(outcomes)}
		if sse.Send(u) != nil {
			return
		}
	}
	sse.sse.Done()
}

// streamChoice streams choice i of a chat: its deltas, then a chunk with
// its finish reason.
func (s *Server) streamChoice(sse *lockedSSE, r *http.Request, m *Model, c *chatCall, i int) (outcome, *apiError) {
	chunk := func(d openai.Delta, finish *string, lp *openai.Logprobs) openai.ChatChunk {
		return openai.ChatChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: m.ID,
			Choices: []openai.ChunkChoice{{Index: i, Delta: d, FinishReason: finish, Logprobs: lp}}}
	}
	empty := ""
	if err := sse.Send(chunk(openai.Delta{Role: "assistant", Content: &empty}, nil, nil)); err != nil {
		return outcome{err: err}, nil
	}
	out := c.newOut()
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
	o, aerr := run(r.Context(), m, c.prompt, c.choiceGen(i), c.newConstraint(m), func(p piece) error {
		reasoning, content := out.feed(p.text, false)
		var lps []openai.TokenLogprob
		if c.gen.logprobs {
			lps = m.logprobs(p.toks)
		}
		return send(reasoning, content, lps)
	})
	if aerr != nil || o.err != nil {
		return o, aerr
	}
	reasoning, content := out.feed("", true)
	if err := send(reasoning, content, nil); err != nil {
		o.err = err
		return o, nil
	}
	finish := finishReason(o.finish, out.calls)
	last := chunk(openai.Delta{}, &finish, nil)
	last.Timings = timingsOf(o.res)
	if err := sse.Send(last); err != nil {
		o.err = err
	}
	return o, nil
}

// chatCall is a checked chat request, ready to run.
type chatCall struct {
	id      string
	created int64
	prompt  []int32
	gen     gen
	machine *grammar.Machine // the constraint's start; nil: none
	think   *bool            // the reply opens with reasoning; nil: no reasoning (constrained, or the template has none)
	tools   bool
	tfmt    toolFormat // how the model writes its calls
	// out is the one reply's parse where generate ran it (pipeline.go)
	out *chatOut
}

// choiceGen is choice i's settings: its own seed, so that the choices
// differ where they sample.
func (c *chatCall) choiceGen(i int) gen {
	g := c.gen
	g.params.Seed += uint64(i)
	return g
}

func (c *chatCall) newConstraint(m *Model) slots.Constraint {
	if c.machine == nil {
		return nil
	}
	return grammar.NewConstraint(m.grammarVocab(), c.machine)
}

// newOut is a choice's parser of the generated text.
func (c *chatCall) newOut() *chatOut {
	o := &chatOut{}
	if c.think != nil {
		o.think = chat.NewThinkParser(*c.think)
	}
	if c.tools {
		o.tools = c.tfmt.parser()
		o.callID = c.tfmt.callID
	}
	return o
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
		logitBias: req.LogitBias,
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
	sch, aerr := requestSchema(req.ResponseFormat, req.JSONSchema, req.Grammar)
	if aerr != nil {
		return nil, aerr
	}
	if sch != nil {
		if mode == "required" {
			return nil, badRequest("response_format", "response_format and a required tool call cannot both constrain the reply")
		}
		machine = grammar.NewMachine(sch)
	}
	tfmt := toolFormatOf(m.Tmpl)
	if mode == "required" {
		if machine, aerr = toolMachine(tools, forced, tfmt); aerr != nil {
			return nil, aerr
		}
	}
	c := &chatCall{id: newID("chatcmpl-"), created: time.Now().Unix(), gen: g, machine: machine, tools: len(tools) > 0, tfmt: tfmt}
	if machine != nil {
		think = false // the reply is the constrained text itself
	}
	release, aerr := s.tokenizing(ctx)
	if aerr != nil {
		return nil, aerr
	}
	defer release()
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	// A trailing assistant message is continued (assistant prefill), as
	// llama-server does: the reply is what follows it.
	cont := false
	if n := len(req.Messages); req.Messages[n-1].Role == "assistant" {
		if len(req.Messages[n-1].ToolCalls) > 0 {
			return nil, badRequest(fmt.Sprintf("messages[%d].tool_calls", n-1), "an assistant message with tool calls cannot be continued")
		}
		cont = true
	}
	if usesJinjaTools(m.Tmpl, req.Messages, tools) {
		// The model's own template writes the tools and the calls.
		tms, aerr := toolMessages(req.Messages, tfmt)
		if aerr != nil {
			return nil, aerr
		}
		var ps []chat.Piece
		var err error
		if cont {
			ps, err = m.Tmpl.ContinueTools(tms, toolDefs(tools), think)
		} else {
			ps, err = m.Tmpl.PromptTools(tms, toolDefs(tools), true, think)
		}
		if err != nil {
			return nil, badRequest("messages", "the model's chat template refused the conversation: %v", err)
		}
		if c.prompt, aerr = m.encodePieces(ps); aerr != nil {
			return nil, aerr
		}
	} else {
		convert := func() ([]chat.Message, *apiError) { return convertMessages(req.Messages, tools, m.Tmpl.DefaultSystem) }
		if tfmt == genericTools {
			// The template writes no tools: they go in the system prompt.
			convert = func() ([]chat.Message, *apiError) { return genericMessages(req.Messages, tools) }
		}
		msgs, aerr := convert()
		if aerr != nil {
			return nil, aerr
		}
		if c.prompt, aerr = m.encodePrompt(msgs, think); aerr != nil {
			return nil, aerr
		}
	}
	c.gen.own = len(c.prompt)
	if !cont {
		c.gen.own -= m.generationPromptTokens(think)
	}
	if machine == nil && m.Tmpl.Thinks() {
		opens := !cont && opensThinking(m.Tmpl.Pieces(nil, true, think))
		c.think = &opens
	}
	return c, nil
}

// encodePrompt tokenizes the conversation with the template, the BOS
// first where the model wants one. Once the tokens pass the context the
// rest is not tokenized: the request is refused either way.
//
// A last message of the assistant's is left open for the reply to
// continue (assistant prefill), as llama-server and Anthropic's API do.
func (m *Model) encodePrompt(msgs []chat.Message, think bool) ([]int32, *apiError) {
	if len(msgs) > 0 && msgs[len(msgs)-1].Role == chat.RoleAssistant {
		return m.encodePieces(m.Tmpl.Continue(msgs, think))
	}
	return m.encodePieces(m.Tmpl.Pieces(msgs, true, think))
}

// encodePieces tokenizes a rendered prompt (see encodePrompt).
func (m *Model) encodePieces(ps []chat.Piece) ([]int32, *apiError) {
	n := 0
	var prompt []int32
	for _, p := range ps {
		if n >= m.Sched.Context() {
			n++ // over the context: refused either way, the rest untokenized
			continue
		}
		ids := m.Tok.Encode(p.Text, p.Special)
		n += len(ids)
		prompt = append(prompt, ids...)
	}
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

// toolMachine constrains the reply to one call in the family's markup, of the
// forced function or any of the tools: its name and arguments that follow
// that function's schema (any object where it has none). A schema the
// recognizer cannot enforce is refused, naming the tool and the keyword.
func toolMachine(tools []openai.Tool, forced string, f toolFormat) (*grammar.Machine, *apiError) {
	var calls []*grammar.Schema
	var named []*grammar.Machine
	for i, t := range tools {
		if forced != "" && t.Function.Name != forced {
			continue
		}
		args := grammar.AnyObject()
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
			var err error
			if args, err = grammar.Compile(p); err != nil {
				param := fmt.Sprintf("tools[%d].function.parameters", i)
				return nil, schemaError(param, fmt.Errorf("the tool %q: %w", t.Function.Name, err))
			}
		}
		if f == mistralArgsTools {
			// The name is markup: one reading per tool.
			named = append(named, grammar.NewWrapped(mistralTC+t.Function.Name+mistralArgs, args, ""))
			continue
		}
		call := grammar.CallKeyed(t.Function.Name, f.argsKey(), args)
		if f == mistralTools && mistralIDSchema != nil {
			// Mistral's calls carry their id, which its templates write
			// back (llama.cpp's grammar for them has it too).
			call = grammar.WithProp(call, "id", mistralIDSchema)
		}
		calls = append(calls, call)
	}
	if f == mistralArgsTools {
		return grammar.Union(named...), nil
	}
	return f.wrap(grammar.AnyOf(calls...)), nil
}

// schemaError refuses a schema Compile refused.
func schemaError(param string, err error) *apiError {
	aerr := badRequest(param, "%v", err)
	if errors.Is(err, grammar.ErrUnsupported) {
		aerr.code = "unsupported_schema"
	}
	return aerr
}

// requestSchema is the schema a request holds its reply to, if any:
// response_format (OpenAI's json_schema and json_object, llama-server's
// short form with the schema beside the type) or llama-server's
// top-level json_schema. A GBNF grammar is refused: the recognizer takes
// JSON schemas only.
func requestSchema(rf *openai.ResponseFormat, jsonSchema json.RawMessage, gbnf string) (*grammar.Schema, *apiError) {
	if strings.TrimSpace(gbnf) != "" {
		return nil, badRequest("grammar", "grammar (GBNF) is not supported: bonsai serve constrains replies by JSON schema (response_format or json_schema)")
	}
	var raw json.RawMessage
	param := ""
	if js := bytes.TrimSpace(jsonSchema); len(js) > 0 && !bytes.Equal(js, []byte("null")) {
		raw, param = js, "json_schema"
	}
	if rf != nil && rf.Type != "text" && rf.Type != "" {
		if raw != nil {
			return nil, badRequest("json_schema", "json_schema and response_format cannot both constrain the reply")
		}
		switch {
		case rf.Type != "json_object" && rf.Type != "json_schema":
			return nil, badRequest("response_format.type", "response_format must be text, json_object or json_schema, not %q", rf.Type)
		case len(rf.Schema) > 0:
			raw, param = rf.Schema, "response_format.schema"
		case rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0:
			raw, param = rf.JSONSchema.Schema, "response_format.json_schema.schema"
		case rf.Type == "json_object":
			return grammar.AnyObject(), nil
		default:
			return nil, badRequest("response_format.json_schema", "json_schema needs a schema")
		}
	}
	if raw == nil {
		return nil, nil
	}
	sch, err := grammar.Compile(raw)
	if err != nil {
		return nil, schemaError(param, err)
	}
	return sch, nil
}

// convertMessages turns the API's messages into the template's, the way
// Qwen3's template writes tools: their signatures in the system turn, the
// assistant's calls as <tool_call> blocks, and each run of tool results as
// one user turn of <tool_response> blocks. Its cost is linear in the
// messages' bytes (a run of 50,000 tool results joined with += took 20 s).
//
// Where the conversation has no system message, the tools go into one of
// their own, after the template's default system prompt if it has one
// (Qwen2.5's "You are Qwen, …", as its template writes it).
func convertMessages(in []openai.Message, tools []openai.Tool, defaultSystem string) ([]chat.Message, *apiError) {
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
		if defaultSystem != "" {
			block = defaultSystem + "\n\n" + block
		}
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
	tools              callParser        // nil: no tools offered
	content, reasoning strings.Builder
	calls              []toolCall
	callID             func() string // a new call's id, where the model wrote none
}

// add takes new calls, giving each its id.
func (o *chatOut) add(calls []toolCall) {
	for _, c := range calls {
		if c.ID == "" && o.callID != nil {
			c.ID = o.callID()
		}
		o.calls = append(o.calls, c)
	}
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
			o.add(calls)
		}
		cb.WriteString(t)
	}
	if end && o.tools != nil {
		t, calls := o.tools.flush()
		o.add(calls)
		cb.WriteString(t)
	}
	o.reasoning.WriteString(rb.String())
	o.content.WriteString(cb.String())
	return rb.String(), cb.String()
}

func wireCall(i int, c toolCall, indexed bool) openai.ToolCall {
	tc := openai.ToolCall{ID: c.ID, Type: "function", Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}}
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
