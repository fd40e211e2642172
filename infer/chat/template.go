package chat

import (
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Special strings of the ChatML family (Qwen2, Qwen3, Bonsai).
const (
	IMStart    = "<|im_start|>"
	IMEnd      = "<|im_end|>"
	EndOfText  = "<|endoftext|>"
	ThinkOpen  = "<think>"
	ThinkClose = "</think>"

	// EmptyThink is what Qwen3's template writes after the generation prompt
	// when thinking is off, so the model answers at once.
	EmptyThink = ThinkOpen + "\n\n" + ThinkClose + "\n\n"
)

// Kind names the template shapes this package renders.
type Kind string

const (
	// KindQwen3 is ChatML with <think> blocks: reasoning stripped from earlier
	// assistant turns, an empty think block pre-filled when thinking is off.
	KindQwen3 Kind = "qwen3"
	// KindChatML is plain ChatML (Qwen2 and most ChatML fine-tunes), with an
	// optional default system prompt.
	KindChatML Kind = "chatml"
)

// Template renders a conversation into a prompt. The zero value is not
// useful: use Qwen3 or FromGGUF.
type Template struct {
	Kind Kind
	// DefaultSystem is sent as the system prompt when the conversation has
	// none ("" sends no system turn).
	DefaultSystem string
	// Source is the Jinja template the file carried ("" for the built-in).
	Source string
	// Recognized is false when the file had a template of a shape this
	// package does not know and the built-in Qwen3 template is used instead.
	Recognized bool
}

// Qwen3 is the built-in template: Qwen3's ChatML as Bonsai uses it.
func Qwen3() *Template { return &Template{Kind: KindQwen3, Recognized: true} }

// FromGGUF picks the template from tokenizer.chat_template: a ChatML template
// that mentions <think> is rendered as Qwen3, another ChatML template as
// ChatML (keeping its default system prompt), and anything else — or no
// template — falls back to the built-in Qwen3 template.
func FromGGUF(kv gguf.Metadata) *Template {
	src, ok := kv.String("tokenizer.chat_template")
	if !ok {
		return Qwen3()
	}
	return FromSource(src)
}

// FromSource recognises a Jinja chat template's shape (see FromGGUF).
func FromSource(src string) *Template {
	if !strings.Contains(src, IMStart) || !strings.Contains(src, IMEnd) {
		t := Qwen3()
		t.Source, t.Recognized = src, false
		return t
	}
	if strings.Contains(src, ThinkOpen) || strings.Contains(src, "enable_thinking") {
		return &Template{Kind: KindQwen3, Source: src, Recognized: true}
	}
	return &Template{Kind: KindChatML, DefaultSystem: defaultSystemPrompt(src), Source: src, Recognized: true}
}

// defaultSystemPrompt finds a literal system turn in a ChatML template, the
// one it writes when the conversation brings no system message (Qwen2's
// "You are a helpful assistant"). Newlines may be real or written "\n".
func defaultSystemPrompt(src string) string {
	for _, open := range []string{IMStart + "system\n", IMStart + `system\n`} {
		i := strings.Index(src, open)
		if i < 0 {
			continue
		}
		body, _, ok := strings.Cut(src[i+len(open):], IMEnd)
		if !ok || strings.ContainsAny(body, "{}'\"+") {
			continue // not a literal: built from variables
		}
		return body
	}
	return ""
}

// StopStrings are the texts that end an assistant turn.
func (t *Template) StopStrings() []string { return []string{IMEnd, EndOfText} }

// StopIDs maps StopStrings to token ids with a vocabulary lookup (such as
// (*tokenizer.Tokenizer).ID), skipping those the vocabulary lacks.
func (t *Template) StopIDs(lookup func(text string) (int32, bool)) []int32 {
	var ids []int32
	for _, s := range t.StopStrings() {
		if id, ok := lookup(s); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// Render writes msgs as a prompt. With addGenerationPrompt the prompt ends
// with the opening of an assistant turn; for Qwen3 with think false that
// opening includes an empty think block, so the model answers without
// reasoning. Earlier assistant turns never carry their reasoning.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool, think bool) string {
	var b strings.Builder
	if t.DefaultSystem != "" && (len(msgs) == 0 || msgs[0].Role != RoleSystem) {
		turn(&b, RoleSystem, t.DefaultSystem)
	}
	lastUser := -1
	for i, m := range msgs {
		if m.Role == RoleUser {
			lastUser = i
		}
	}
	for i, m := range msgs {
		if m.Role != RoleAssistant || t.Kind != KindQwen3 {
			turn(&b, m.Role, m.Content)
			continue
		}
		thinking, content := m.Thinking, m.Content
		if strings.Contains(content, ThinkClose) {
			inline, rest := SplitThinking(content)
			if thinking == "" {
				thinking = inline
			}
			content = rest
		}
		content = strings.TrimLeft(content, "\n")
		// Reasoning is kept only for assistant turns after the last user
		// message (a reply in progress), as Qwen3's template does.
		if i > lastUser && (i == len(msgs)-1 || thinking != "") {
			content = ThinkOpen + "\n" + strings.Trim(thinking, "\n") + "\n" + ThinkClose + "\n\n" + content
		}
		turn(&b, m.Role, content)
	}
	if addGenerationPrompt {
		b.WriteString(IMStart + RoleAssistant + "\n")
		if t.Kind == KindQwen3 && !think {
			b.WriteString(EmptyThink)
		}
	}
	return b.String()
}

func turn(b *strings.Builder, role, content string) {
	b.WriteString(IMStart)
	b.WriteString(role)
	b.WriteString("\n")
	b.WriteString(content)
	b.WriteString(IMEnd + "\n")
}
