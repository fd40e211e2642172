package chat

import (
	"strings"
	"testing"
)

func TestRenderQwen3(t *testing.T) {
	tests := []struct {
		name     string
		msgs     []Message
		genPromt bool
		think    bool
		want     string
	}{
		{
			name:     "user only, thinking off",
			msgs:     []Message{{Role: RoleUser, Content: "Hi"}},
			genPromt: true,
			want:     "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
		},
		{
			name:     "user only, thinking on",
			msgs:     []Message{{Role: RoleUser, Content: "Hi"}},
			genPromt: true,
			think:    true,
			want:     "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			name: "system prompt and earlier reasoning stripped",
			msgs: []Message{
				{Role: RoleSystem, Content: "Be brief."},
				{Role: RoleUser, Content: "2+2?"},
				{Role: RoleAssistant, Thinking: "Add them.", Content: "4"},
				{Role: RoleUser, Content: "3+3?"},
			},
			genPromt: true,
			want: "<|im_start|>system\nBe brief.<|im_end|>\n" +
				"<|im_start|>user\n2+2?<|im_end|>\n" +
				"<|im_start|>assistant\n4<|im_end|>\n" +
				"<|im_start|>user\n3+3?<|im_end|>\n" +
				"<|im_start|>assistant\n<think>\n\n</think>\n\n",
		},
		{
			name: "inline think block in earlier content is stripped",
			msgs: []Message{
				{Role: RoleUser, Content: "a"},
				{Role: RoleAssistant, Content: "<think>\nhmm\n</think>\n\nb"},
				{Role: RoleUser, Content: "c"},
			},
			genPromt: false,
			want: "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n" +
				"<|im_start|>user\nc<|im_end|>\n",
		},
		{
			name: "last assistant turn after the last user keeps its reasoning",
			msgs: []Message{
				{Role: RoleUser, Content: "a"},
				{Role: RoleAssistant, Thinking: "\nweigh it\n", Content: "b"},
			},
			want: "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nweigh it\n</think>\n\nb<|im_end|>\n",
		},
		{
			name: "last assistant turn without reasoning gets an empty block",
			msgs: []Message{
				{Role: RoleUser, Content: "a"},
				{Role: RoleAssistant, Content: "b"},
			},
			want: "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nb<|im_end|>\n",
		},
		{
			name:     "empty conversation",
			genPromt: true,
			want:     "<|im_start|>assistant\n<think>\n\n</think>\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Qwen3().Render(tt.msgs, tt.genPromt, tt.think); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// qwen2Template is the chat template of llama.cpp's ggml-vocab-qwen2.gguf.
const qwen2Template = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

func TestFromSource(t *testing.T) {
	tests := []struct {
		name       string
		src        string
		kind       Kind
		system     string
		recognized bool
	}{
		{"qwen2 chatml with default system", qwen2Template, KindChatML, "You are a helpful assistant", true},
		{"qwen2 with escaped newlines", `{{ '<|im_start|>system\nYou are Qwen.<|im_end|>\n' }}{{ '<|im_start|>user' }}`, KindChatML, "You are Qwen.", true},
		{"qwen2.5: the literal after a turn built from variables", "{{- '<|im_start|>system\\n' }}{{- messages[0]['content'] }}{{- '<|im_end|>' }}" +
			"{{- '<|im_start|>system\\nYou are Qwen.<|im_end|>\\n' }}", KindChatML, "You are Qwen.", true},
		{"qwen3", "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}<|im_start|><|im_end|>", KindQwen3, "", true},
		{"bonsai built-in", Qwen3Source, KindQwen3, "", true},
		{"llama3 falls back", "{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}", KindQwen3, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromSource(tt.src)
			if got.Kind != tt.kind || got.DefaultSystem != tt.system || got.Recognized != tt.recognized {
				t.Errorf("got kind %q system %q recognized %v; want %q %q %v", got.Kind, got.DefaultSystem, got.Recognized, tt.kind, tt.system, tt.recognized)
			}
		})
	}
}

func TestRenderChatMLDefaultSystem(t *testing.T) {
	tpl := FromSource(qwen2Template)
	got := tpl.Render([]Message{{Role: RoleUser, Content: "Hi"}}, true, false)
	want := "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	got = tpl.Render([]Message{{Role: RoleSystem, Content: "S"}, {Role: RoleUser, Content: "Hi"}}, false, false)
	want = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStopIDs(t *testing.T) {
	vocab := map[string]int32{"<|im_end|>": 151645, "<|endoftext|>": 151643}
	got := Qwen3().StopIDs(func(s string) (int32, bool) { id, ok := vocab[s]; return id, ok })
	if len(got) != 2 || got[0] != 151645 || got[1] != 151643 {
		t.Errorf("StopIDs = %v", got)
	}
}

// Issue 34 item 6: a trailing assistant message is continued, not closed:
// the prompt ends with its text (after Qwen3's think block), with no
// end-of-turn mark and no new turn opened.
func TestContinueLeavesTheLastMessageOpen(t *testing.T) {
	msgs := []Message{{Role: RoleUser, Content: "Quote Paul"}, {Role: RoleAssistant, Content: "Grace be"}}
	for _, c := range []struct {
		tmpl *Template
		want string
	}{
		{Qwen3(), "<|im_start|>user\nQuote Paul<|im_end|>\n<|im_start|>assistant\n" + EmptyThink + "Grace be"},
		{&Template{Kind: KindChatML, Recognized: true}, "<|im_start|>user\nQuote Paul<|im_end|>\n<|im_start|>assistant\nGrace be"},
	} {
		var b strings.Builder
		for _, p := range c.tmpl.Continue(msgs, false) {
			b.WriteString(p.Text)
		}
		if b.String() != c.want {
			t.Errorf("%s: %q, want %q", c.tmpl.Kind, b.String(), c.want)
		}
	}
}

// Only templates with reasoning blocks have the reply's <think> parsed out.
func TestThinks(t *testing.T) {
	llama3 := "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
	r1 := "{%- if '</think>' in content %}{{'<｜Assistant｜>' + content}}{% endif %}{{'<think>\\n'}}"
	for _, c := range []struct {
		tmpl *Template
		want bool
	}{
		{Qwen3(), true},
		{FromSource(qwen2Template), false},
		{FromSource(Qwen3Source), true},
		{&Template{Kind: KindJinja, Source: llama3}, false},
		{&Template{Kind: KindJinja, Source: r1}, true},
	} {
		if got := c.tmpl.Thinks(); got != c.want {
			t.Errorf("%s %.40q: Thinks %v, want %v", c.tmpl.Kind, c.tmpl.Source, got, c.want)
		}
	}
}

// TestThinkTags: each family's own template names its reasoning markers.
func TestThinkTags(t *testing.T) {
	for _, c := range []struct {
		name   string
		thinks bool
		want   ThinkTags
	}{
		{"Qwen-Qwen3-0.6B", true, DefaultThinkTags},
		{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", true, DefaultThinkTags},
		{"mistralai-Ministral-3-14B-Reasoning-2512", true, MistralThinkTags},
		{"Mistral-Small-3.2-24B-Instruct-2506", false, DefaultThinkTags},
		{"meta-llama-Llama-3.1-8B-Instruct", false, DefaultThinkTags},
	} {
		src := readTemplate(t, c.name)
		tmpl := FromSource(src)
		if !tmpl.Recognized { // not ChatML: rendered as Jinja, as FromGGUF does
			var err error
			if tmpl, err = FromJinja(src, Specials{}); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if got := tmpl.Thinks(); got != c.thinks {
			t.Errorf("%s: Thinks %v, want %v", c.name, got, c.thinks)
		}
		if got := tmpl.ThinkTags(); got != c.want {
			t.Errorf("%s: ThinkTags %q, want %q", c.name, got, c.want)
		}
	}
	if got := Qwen3().ThinkTags(); got != DefaultThinkTags {
		t.Errorf("built-in Qwen3: ThinkTags %q", got)
	}
}
