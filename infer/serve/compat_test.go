package serve_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/serve"
)

// Issue 34 item 1: a request naming any model ("gpt-4o", a case variant)
// is answered by the loaded model, and the reply names the model that
// answered, as llama-server's does; the model list keeps the loaded id.
func TestAnyModelNameGetsTheLoadedModel(t *testing.T) {
	s := startServer(t, "", 1)
	for _, name := range []string{"gpt-4o", "gpt-3.5-turbo", "TINY", "tiny", ""} {
		for _, c := range []struct{ path, body string }{
			{"/v1/chat/completions", `{"model":"` + name + `","max_tokens":2,"messages":[{"role":"user","content":"x"}]}`},
			{"/v1/completions", `{"model":"` + name + `","max_tokens":2,"prompt":"x"}`},
		} {
			r := post(t, s, c.path, c.body)
			var resp struct {
				Model string `json:"model"`
			}
			if err := json.Unmarshal([]byte(r.body), &resp); err != nil || r.status != 200 || resp.Model != testModel {
				t.Errorf("%s model %q: %d %.200s", c.path, name, r.status, r.body)
			}
		}
	}
	r := get(t, s, "/v1/models", "")
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list.Data) != 1 || list.Data[0].ID != testModel {
		t.Errorf("/v1/models: %s", r.body)
	}
}

// chatJSON posts a chat request and decodes the reply.
func chatJSON(t *testing.T, s *testServer, body string) (chatReply, answer) {
	t.Helper()
	r := post(t, s, "/v1/chat/completions", body)
	var reply chatReply
	if r.status == 200 {
		if err := json.Unmarshal([]byte(r.body), &reply); err != nil {
			t.Fatalf("%s: %v", r.body, err)
		}
	}
	return reply, r
}

type chatReply struct {
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// strictDecode decodes text into v, refusing unknown fields and trailing
// text.
func strictDecode(text string, v any) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("text after the JSON")
	}
	return nil
}

// The schema zod's zodResponseFormat writes for
// z.object({name: z.string().min(1).max(10), age: z.number().int().min(0).max(120),
// nick: z.string().max(5).nullable(), kind: z.union([...]), email: z.string().email()}).
const zodPerson = `{"type":"object","properties":{
	"name":{"type":"string","minLength":1,"maxLength":10},
	"age":{"type":"integer","minimum":0,"maximum":120},
	"nick":{"anyOf":[{"type":"string","maxLength":5},{"type":"null"}]},
	"kind":{"anyOf":[{"type":"string","enum":["cat","dog"]},{"type":"integer","exclusiveMinimum":10,"exclusiveMaximum":13}]},
	"email":{"type":"string","format":"email"}},
	"required":["name","age","nick","kind","email"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`

type zodPersonT struct {
	Name  string          `json:"name"`
	Age   json.Number     `json:"age"`
	Nick  *string         `json:"nick"`
	Kind  json.RawMessage `json:"kind"`
	Email string          `json:"email"`
}

func checkZodPerson(t *testing.T, text string) {
	t.Helper()
	var p zodPersonT
	if err := strictDecode(text, &p); err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	age, err := strconv.Atoi(p.Age.String())
	n := len([]rune(p.Name))
	kind := string(p.Kind)
	if err != nil || age < 0 || age > 120 || n < 1 || n > 10 || p.Nick != nil && len([]rune(*p.Nick)) > 5 ||
		kind != `"cat"` && kind != `"dog"` && kind != "11" && kind != "12" || !regexp.MustCompile(`^[^@]+@[^@.]+(\.[^@.]+)+$`).MatchString(p.Email) {
		t.Fatalf("%q does not validate", text)
	}
}

// Issue 34 item 2: what zod and pydantic write is enforced, in the
// standard response_format, llama-server's short form and its top-level
// json_schema, in chat and text completions.
func TestZodAndPydanticSchemasServed(t *testing.T) {
	s := startServer(t, "", 4)
	const msgs = `"messages":[{"role":"user","content":"A person as JSON"}],"temperature":1,"max_tokens":300`
	var wg sync.WaitGroup
	for seed := range 8 {
		wg.Go(func() {
			var body string
			switch seed % 3 {
			case 0:
				body = `{` + msgs + `,"seed":` + strconv.Itoa(seed) + `,"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":` + zodPerson + `}}}`
			case 1:
				body = `{` + msgs + `,"seed":` + strconv.Itoa(seed) + `,"response_format":{"type":"json_schema","schema":` + zodPerson + `}}`
			case 2:
				body = `{` + msgs + `,"seed":` + strconv.Itoa(seed) + `,"json_schema":` + zodPerson + `}`
			}
			reply, r := chatJSON(t, s, body)
			if r.status != 200 || len(reply.Choices) != 1 || reply.Choices[0].FinishReason != "stop" {
				t.Errorf("seed %d: %d %.300s", seed, r.status, r.body)
				return
			}
			checkZodPerson(t, *reply.Choices[0].Message.Content)
		})
	}
	wg.Wait()
	// pydantic: $defs, $ref, anyOf with null and a default, titles.
	const pydantic = `{"$defs":{"Pet":{"properties":{"name":{"title":"Name","type":"string","maxLength":8},"legs":{"type":"integer","minimum":0,"maximum":4,"title":"Legs"}},
		"required":["name","legs"],"title":"Pet","type":"object"}},
		"properties":{"pets":{"items":{"$ref":"#/$defs/Pet"},"maxItems":2,"title":"Pets","type":"array"},
		"owner":{"anyOf":[{"type":"string","maxLength":8},{"type":"null"}],"default":null,"title":"Owner"}},
		"required":["pets"],"title":"Household","type":"object"}`
	r := post(t, s, "/v1/completions", `{"prompt":"JSON:","temperature":1,"seed":3,"max_tokens":200,"n":2,"response_format":{"type":"json_schema","json_schema":{"name":"h","schema":`+pydantic+`}}}`)
	var cr struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(r.body), &cr); err != nil || r.status != 200 || len(cr.Choices) != 2 {
		t.Fatalf("%d %.300s", r.status, r.body)
	}
	for _, ch := range cr.Choices {
		var h struct {
			Pets []struct {
				Name string `json:"name"`
				Legs int    `json:"legs"`
			} `json:"pets"`
			Owner *string `json:"owner"`
		}
		if ch.FinishReason != "stop" {
			continue // cut at the limit
		}
		if err := strictDecode(ch.Text, &h); err != nil || h.Pets == nil || len(h.Pets) > 2 || h.Owner != nil && len([]rune(*h.Owner)) > 8 {
			t.Errorf("%q does not validate: %v", ch.Text, err)
		}
		for _, p := range h.Pets {
			if p.Legs < 0 || p.Legs > 4 || len([]rune(p.Name)) > 8 {
				t.Errorf("%q does not validate", ch.Text)
			}
		}
	}
}

// Issue 34 item 3: with tool_choice "required", several tools, one of
// them with bounds, anyOf and $ref in its schema, the call names a tool
// and its arguments validate against that tool's schema; a forced tool
// is the one called.
func TestRequiredToolCallsValidate(t *testing.T) {
	s := startServerWith(t, "", serve.LoadOptions{ID: testModel, Slots: 4, Context: 1024, Threads: 2, Batch: 64, Backend: "cpu"})
	const tools = `"tools":[
		{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["C","F"]}},"required":["city","unit"],"additionalProperties":false}}},
		{"type":"function","function":{"name":"book","parameters":{"$defs":{"Day":{"type":"string","format":"date"}},"type":"object",
			"properties":{"seats":{"type":"integer","minimum":1,"maximum":9},"day":{"$ref":"#/$defs/Day"},"note":{"anyOf":[{"type":"string","maxLength":6},{"type":"null"}]}},
			"required":["seats","day","note"],"additionalProperties":false}}}]`
	check := func(name, args string) error {
		switch name {
		case "get_weather":
			var a struct {
				City string `json:"city"`
				Unit string `json:"unit"`
			}
			if err := strictDecode(args, &a); err != nil || len([]rune(a.City)) > 12 || a.Unit != "C" && a.Unit != "F" {
				return fmt.Errorf("get_weather %q: %v", args, err)
			}
		case "book":
			var a struct {
				Seats *int    `json:"seats"`
				Day   string  `json:"day"`
				Note  *string `json:"note"`
			}
			if err := strictDecode(args, &a); err != nil || a.Seats == nil || *a.Seats < 1 || *a.Seats > 9 ||
				!regexp.MustCompile(`^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$`).MatchString(a.Day) || a.Note != nil && len([]rune(*a.Note)) > 6 {
				return fmt.Errorf("book %q: %v", args, err)
			}
		default:
			return fmt.Errorf("a call of %q", name)
		}
		return nil
	}
	var wg sync.WaitGroup
	names := make([]string, 12)
	for seed := range 12 {
		wg.Go(func() {
			choice := `"required"`
			if seed >= 8 {
				choice = `{"type":"function","function":{"name":"book"}}`
			}
			reply, r := chatJSON(t, s, `{"messages":[{"role":"user","content":"Book or weather?"}],`+tools+`,"tool_choice":`+choice+
				`,"temperature":1,"seed":`+strconv.Itoa(seed)+`,"max_tokens":600}`)
			if r.status != 200 || len(reply.Choices) != 1 {
				t.Errorf("seed %d: %d %.300s", seed, r.status, r.body)
				return
			}
			ch := reply.Choices[0]
			if ch.FinishReason == "length" {
				return // cut inside the call: nothing to check
			}
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
				t.Errorf("seed %d: %s %d calls %.100s", seed, ch.FinishReason, len(ch.Message.ToolCalls), r.body)
				return
			}
			call := ch.Message.ToolCalls[0].Function
			names[seed] = call.Name
			if err := check(call.Name, call.Arguments); err != nil {
				t.Errorf("seed %d: %v", seed, err)
			}
		})
	}
	wg.Wait()
	if n := len(slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "" })); n < 9 {
		t.Errorf("only %d of 12 calls finished within the limit", n)
	}
	for seed := 8; seed < 12; seed++ {
		if names[seed] != "book" && names[seed] != "" {
			t.Errorf("seed %d: the forced book, but %q called", seed, names[seed])
		}
	}
	// A tool whose schema cannot be enforced is refused by name when a
	// call is required.
	r := post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"n":{"type":"integer","multipleOf":2}}}}}]}`)
	if r.status != 400 || !strings.Contains(r.body, "multipleOf") || !strings.Contains(r.body, `\"f\"`) {
		t.Errorf("an unenforceable tool: %d %s", r.status, r.body)
	}
}

// Issue 34 item 6: a trailing assistant message is continued: the reply
// is greedy decoding's continuation of the prompt that ends with that
// message's text, left open (what the raw completion of that prompt gives),
// not a new turn.
func TestTrailingAssistantMessageContinued(t *testing.T) {
	s := startServer(t, "", 1)
	reply, r := chatJSON(t, s, `{"messages":[{"role":"user","content":"Quote Paul"},{"role":"assistant","content":"Grace be unto"}],"temperature":0,"max_tokens":8}`)
	if r.status != 200 || len(reply.Choices) != 1 || reply.Choices[0].Message.Content == nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	prompt, _ := json.Marshal("<|im_start|>user\nQuote Paul<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nGrace be unto")
	raw := post(t, s, "/v1/completions", `{"prompt":`+string(prompt)+`,"temperature":0,"max_tokens":8}`)
	var cr struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(raw.body), &cr); err != nil || len(cr.Choices) != 1 {
		t.Fatalf("%s", raw.body)
	}
	if got := *reply.Choices[0].Message.Content; got != cr.Choices[0].Text {
		t.Errorf("continued %q, the open prompt's continuation %q", got, cr.Choices[0].Text)
	}
	r = post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`)
	if r.status != 400 || !strings.Contains(r.body, "continued") {
		t.Errorf("continuing a tool call: %d %s", r.status, r.body)
	}
}

type completionReply struct {
	Choices []struct {
		Index        int    `json:"index"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func complete(t *testing.T, s *testServer, body string) completionReply {
	t.Helper()
	r := post(t, s, "/v1/completions", body)
	var cr completionReply
	if err := json.Unmarshal([]byte(r.body), &cr); err != nil || r.status != 200 {
		t.Fatalf("%s: %d %.300s", body, r.status, r.body)
	}
	return cr
}

func tokenIDs(t *testing.T, s *testServer, text string) []int32 {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"content": text})
	r := post(t, s, "/tokenize", string(b))
	var tok struct {
		Tokens []int32 `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(r.body), &tok); err != nil || len(tok.Tokens) == 0 {
		t.Fatalf("tokenize %q: %s", text, r.body)
	}
	return tok.Tokens
}

// Issue 34 item 5: logit_bias is applied: +100 on a token makes greedy
// decoding pick it every time; a ban (-100, or llama-server's false) on
// greedy decoding's first token makes it pick another.
func TestLogitBiasApplied(t *testing.T) {
	s := startServer(t, "", 1)
	const prompt = `"prompt":"Once upon a time","temperature":0,"max_tokens":4`
	hello := tokenIDs(t, s, " hello")
	if len(hello) != 1 {
		t.Fatalf("%q is %d tokens", " hello", len(hello))
	}
	got := complete(t, s, `{`+prompt+`,"logit_bias":{"`+strconv.Itoa(int(hello[0]))+`":100}}`)
	if got.Choices[0].Text != strings.Repeat(" hello", 4) {
		t.Errorf("+100 on %q: %q", " hello", got.Choices[0].Text)
	}
	plain := complete(t, s, `{`+prompt+`}`).Choices[0].Text
	first := tokenIDs(t, s, plain)[0]
	for _, bias := range []string{`{"` + strconv.Itoa(int(first)) + `":-100}`, `[[` + strconv.Itoa(int(first)) + `,false]]`} {
		got := complete(t, s, `{`+prompt+`,"logit_bias":`+bias+`}`).Choices[0].Text
		if got == "" || tokenIDs(t, s, got)[0] == first {
			t.Errorf("%s: %q, greedy %q", bias, got, plain)
		}
	}
	// Chat takes it too.
	reply, r := chatJSON(t, s, `{"messages":[{"role":"user","content":"hi"}],"temperature":0,"max_tokens":3,"logit_bias":{"`+strconv.Itoa(int(hello[0]))+`":100}}`)
	if r.status != 200 || *reply.Choices[0].Message.Content != strings.Repeat(" hello", 3) {
		t.Errorf("chat with +100: %d %s", r.status, r.body)
	}
}

// Issue 34 item 5: n > 1 makes n choices (greedy ones alike, sampled ones
// each with its seed), streamed ones by index; max_tokens -1 runs to the
// context's end.
func TestSeveralChoicesAndNoLimit(t *testing.T) {
	s := startServer(t, "", 2)
	reply, r := chatJSON(t, s, `{"messages":[{"role":"user","content":"hi"}],"temperature":1,"seed":5,"max_tokens":6,"n":3}`)
	if r.status != 200 || len(reply.Choices) != 3 {
		t.Fatalf("%d %.300s", r.status, r.body)
	}
	texts := map[string]bool{}
	for i, ch := range reply.Choices {
		if ch.Index != i || ch.Message.Content == nil {
			t.Errorf("choice %d: %+v", i, ch)
			continue
		}
		texts[*ch.Message.Content] = true
	}
	if len(texts) < 2 {
		t.Errorf("3 sampled choices, all %v", texts)
	}
	if reply.Usage.CompletionTokens != 18 {
		t.Errorf("usage %+v", reply.Usage)
	}
	// Streamed: each choice's deltas under its index add up to what the
	// greedy request alone answers.
	alone, _ := chatJSON(t, s, `{"messages":[{"role":"user","content":"hi"}],"temperature":0,"max_tokens":6}`)
	resp, body := send(t, s, "POST", "/v1/chat/completions", "", `{"messages":[{"role":"user","content":"hi"}],"temperature":0,"max_tokens":6,"n":2,"stream":true}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got := make([]string, 2)
	finished := 0
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Index        int     `json:"index"`
				FinishReason *string `json:"finish_reason"`
				Delta        struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != nil {
				got[c.Index] += *c.Delta.Content
			}
			if c.FinishReason != nil {
				finished++
			}
		}
	}
	if want := *alone.Choices[0].Message.Content; got[0] != want || got[1] != want || finished != 2 {
		t.Errorf("streamed %q (%d finished), alone %q", got, finished, want)
	}
	// max_tokens -1: no limit but the slot's context (384 tokens).
	cr := complete(t, s, `{"prompt":"Once upon a time","temperature":0,"max_tokens":-1,"ignore_eos":true}`)
	if ch := cr.Choices[0]; ch.FinishReason != "length" || cr.Usage.PromptTokens+cr.Usage.CompletionTokens < 383 {
		t.Errorf("max_tokens -1: %s after %+v", ch.FinishReason, cr.Usage)
	}
}

// Issue 34 item 5: /v1/completions takes a prompt array (a choice each,
// n apiece), token-id prompts (one array, or an array of arrays) and echo.
func TestCompletionPromptForms(t *testing.T) {
	s := startServer(t, "", 2)
	const knobs = `"temperature":0,"max_tokens":5`
	a := complete(t, s, `{"prompt":"Once upon a time",`+knobs+`}`).Choices[0].Text
	b := complete(t, s, `{"prompt":"The sea",`+knobs+`}`).Choices[0].Text
	cr := complete(t, s, `{"prompt":["Once upon a time","The sea"],"n":2,`+knobs+`}`)
	if len(cr.Choices) != 4 {
		t.Fatalf("%+v", cr)
	}
	for i, want := range []string{a, a, b, b} {
		if cr.Choices[i].Index != i || cr.Choices[i].Text != want {
			t.Errorf("choice %d: %+v, want %q", i, cr.Choices[i], want)
		}
	}
	ids, _ := json.Marshal(tokenIDs(t, s, "Once upon a time"))
	if got := complete(t, s, `{"prompt":`+string(ids)+`,`+knobs+`}`).Choices[0].Text; got != a {
		t.Errorf("token ids: %q, text prompt %q", got, a)
	}
	sea, _ := json.Marshal(tokenIDs(t, s, "The sea"))
	cr = complete(t, s, `{"prompt":[`+string(ids)+`,`+string(sea)+`],`+knobs+`}`)
	if len(cr.Choices) != 2 || cr.Choices[0].Text != a || cr.Choices[1].Text != b {
		t.Errorf("arrays of token ids: %+v", cr.Choices)
	}
	if got := complete(t, s, `{"prompt":"Once upon a time","echo":true,`+knobs+`}`).Choices[0].Text; got != "Once upon a time"+a {
		t.Errorf("echo: %q", got)
	}
	// Streamed, the echo comes first.
	resp, body := send(t, s, "POST", "/v1/completions", "", `{"prompt":"Once upon a time","echo":true,"stream":true,`+knobs+`}`)
	var streamed strings.Builder
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk completionReply
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Choices {
			streamed.WriteString(c.Text)
		}
	}
	if resp.StatusCode != 200 || streamed.String() != "Once upon a time"+a {
		t.Errorf("streamed echo: %d %q", resp.StatusCode, streamed.String())
	}
	for _, bad := range []string{`{"prompt":[]}`, `{"prompt":[[]]}`, `{"prompt":[99999999]}`, `{"prompt":[1,"x"]}`,
		`{"prompt":"x","echo":true,"logprobs":1}`, `{"prompt":["a","b","c","d","e"],"n":4}`} {
		if r := post(t, s, "/v1/completions", bad); r.status != 400 {
			t.Errorf("%s: %d %s", bad, r.status, r.body)
		}
	}
}

// Issue 34 item 7: a preflight from an allowed origin is granted the
// headers the client asks for (a browser SDK sends its own, such as
// openai's x-stainless-*); an origin not allowed gets no CORS headers.
func TestCORSPreflightGrantsClientHeaders(t *testing.T) {
	app := "https://app.example"
	s := startServerOpts(t, serve.Options{CORS: []string{app}}, serve.LoadOptions{ID: testModel, Slots: 1, Context: 384, Threads: 2, Backend: "cpu"}, nil)
	const asked = "authorization, content-type, x-stainless-os, x-stainless-retry-count"
	resp, _ := send(t, s, "OPTIONS", "/v1/chat/completions", "", "", "Origin", app, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", asked)
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != app || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "x-stainless-os") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = send(t, s, "OPTIONS", "/v1/chat/completions", "", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", asked)
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Headers") != "" || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a foreign origin's preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

// Issue 34 item 2: hostile schemas (a loop of references, nesting two
// thousand deep, a pattern whose automaton explodes) are refused with a
// 400 naming the problem, quickly.
func TestHostileSchemasRefusedFast(t *testing.T) {
	s := startServer(t, "", 1)
	for name, schema := range map[string]string{
		"ref loop": `{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`,
		"deep":     strings.Repeat(`{"type":"array","items":`, 2000) + `{}` + strings.Repeat(`}`, 2000),
		"pattern":  `{"type":"string","pattern":"^(a|b)*a(a|b){40}$"}`,
	} {
		start := time.Now()
		r := post(t, s, "/v1/chat/completions", `{"max_tokens":4,"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"h","schema":`+schema+`}}}`)
		if r.status != 400 || !strings.Contains(r.body, "response_format.json_schema.schema") {
			t.Errorf("%s: %d %.300s", name, r.status, r.body)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: refused after %s", name, took)
		}
	}
}
