package chat

import (
	"encoding/json"
	"os"
	"testing"
)

// llamaCppCase is one entry of llama.cpp's tests/test-chat-template.cpp
// (testdata/llamacpp_chat_template_cases.json, extracted from it as is):
// a template and the prompt llama.cpp renders for a fixed conversation.
type llamaCppCase struct {
	Name               string      `json:"name"`
	Template           string      `json:"template_str"`
	Expected           string      `json:"expected_output"`
	ExpectedJinja      string      `json:"expected_output_jinja"`
	BOS                string      `json:"bos_token"`
	EOS                string      `json:"eos_token"`
	SupportedWithJinja *bool       `json:"supported_with_jinja"`
	ExtraConversation  [][2]string `json:"extra_conversation"`
}

// llamaCppConversation is the conversation every case renders.
var llamaCppConversation = []Message{
	{Role: RoleSystem, Content: "You are a helpful assistant"},
	{Role: RoleUser, Content: "Hello"},
	{Role: RoleAssistant, Content: "Hi there"},
	{Role: RoleUser, Content: "Who are you"},
	{Role: RoleAssistant, Content: "   I am an assistant   "},
	{Role: RoleUser, Content: "Another question"},
}

func loadLlamaCppCases(t *testing.T) []llamaCppCase {
	t.Helper()
	data, err := os.ReadFile("testdata/llamacpp_chat_template_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []llamaCppCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// Every template llama.cpp's own test renders with its Jinja engine
// renders here to the same string (its expected_output_jinja where it has
// one, which applies the system-message merge, else expected_output).
func TestJinjaMatchesLlamaCppExpectations(t *testing.T) {
	cases := loadLlamaCppCases(t)
	if len(cases) < 30 {
		t.Fatalf("only %d cases read", len(cases))
	}
	for _, c := range cases {
		if c.SupportedWithJinja != nil && !*c.SupportedWithJinja {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			tpl, err := FromJinja(c.Template, Specials{BOS: c.BOS, EOS: c.EOS})
			if err != nil {
				t.Fatal(err)
			}
			msgs := append([]Message(nil), llamaCppConversation...)
			for _, m := range c.ExtraConversation {
				msgs = append(msgs, Message{Role: m[0], Content: m[1]})
			}
			want := c.ExpectedJinja
			if want == "" {
				want = c.Expected
			}
			p, err := tpl.Prompt(msgs, true, true)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, s := range p {
				got += s.Text
			}
			if got != want {
				t.Errorf("got\n%q\nwant\n%q", got, want)
			}
		})
	}
}
