package chat

import (
	"slices"
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
	// JinjaErr says why an unrecognised template could not be rendered
	// with the Jinja engine (nil when it was, or was not tried).
	JinjaErr error

	jinja *jinjaState // KindJinja
}

// Qwen3 is the built-in template: Qwen3's ChatML as Bonsai uses it.
func Qwen3() *Template { return &Template{Kind: KindQwen3, Recognized: true} }

// FromGGUF picks the template from tokenizer.chat_template: a ChatML template
// that mentions <think> is rendered as Qwen3, another ChatML template as
// ChatML (keeping its default system prompt), any other template with the
// Jinja engine (KindJinja, with the vocabulary's control tokens and
// end-of-generation tokens), and no template — or one the engine cannot
// render — falls back to the built-in Qwen3 template.
func FromGGUF(kv gguf.Metadata) *Template {
	src, ok := kv.String("tokenizer.chat_template")
	if !ok {
		return Qwen3()
	}
	t := FromSource(src)
	if t.Recognized {
		return t
	}
	j, err := FromJinja(src, SpecialsFromGGUF(kv, src))
	if err != nil {
		t.JinjaErr = err
		return t
	}
	return j
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
	// Qwen2.5's writes a system turn from variables first (its tools
	// branch), the literal one later: every opening is looked at.
	for _, open := range []string{IMStart + "system\n", IMStart + `system\n`} {
		for rest := src; ; {
			i := strings.Index(rest, open)
			if i < 0 {
				break
			}
			rest = rest[i+len(open):]
			body, _, ok := strings.Cut(rest, IMEnd)
			if !ok || strings.ContainsAny(body, "{}'\"+") {
				continue // not a literal: built from variables
			}
			return body
		}
	}
	return ""
}

// Thinks says the model may reason in blocks between its ThinkTags:
// Qwen3's template (built in or recognised), or a template of the file's
// own that writes them. Other families' replies are all answer: a
// "<think>" in them is text.
func (t *Template) Thinks() bool {
	return t.Kind == KindQwen3 || strings.Contains(t.Source, ThinkOpen) || t.mistralThinks()
}

// ThinkTags are the markers of the model's reasoning: Mistral's [THINK]
// and [/THINK] where the template writes those and no <think>
// (Magistral, Ministral 3 Reasoning), else <think> and </think>.
func (t *Template) ThinkTags() ThinkTags {
	if t.Kind != KindQwen3 && !strings.Contains(t.Source, ThinkOpen) && t.mistralThinks() {
		return MistralThinkTags
	}
	return DefaultThinkTags
}

// mistralThinks says the template writes Mistral's reasoning blocks.
func (t *Template) mistralThinks() bool {
	return strings.Contains(t.Source, MistralThinkTags.Open) && strings.Contains(t.Source, MistralThinkTags.Close)
}

// StopStrings are the texts that end an assistant turn.
func (t *Template) StopStrings() []string {
	if t.jinja != nil {
		return slices.Clone(t.jinja.sp.Stops)
	}
	return []string{IMEnd, EndOfText}
}

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

// Piece is a piece of a rendered prompt. Special pieces are the
// template's own markers (<|im_start|>, <|im_end|>), to be encoded as control
// tokens; the rest — roles, newlines and every message's text — is plain
// text, so that a "<|im_end|>" a user types or a stored reply holds stays
// characters and cannot end a turn or open a forged one.
type Piece struct {
	Text    string
	Special bool
}

// Render writes msgs as a prompt. With addGenerationPrompt the prompt ends
// with the opening of an assistant turn; for Qwen3 with think false that
// opening includes an empty think block, so the model answers without
// reasoning. Earlier assistant turns never carry their reasoning. The text is
// for display and logs: encode prompts with Encode.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool, think bool) string {
	var b strings.Builder
	for _, s := range t.Pieces(msgs, addGenerationPrompt, think) {
		b.WriteString(s.Text)
	}
	return b.String()
}

// Encode tokenizes the prompt Render writes with encode (a tokenizer's
// Encode: text, and whether special tokens in it are parsed): the markers
// with special tokens parsed, everything between them without. Plain text
// between two markers is encoded in one piece, as a tokenizer that splits
// the whole prompt at its special tokens would see it, so an ordinary
// conversation encodes to the same ids as before.
func (t *Template) Encode(msgs []Message, addGenerationPrompt, think bool, encode func(text string, special bool) []int32) []int32 {
	var ids []int32
	for _, s := range t.Pieces(msgs, addGenerationPrompt, think) {
		ids = append(ids, encode(s.Text, s.Special)...)
	}
	return ids
}

// Pieces is the prompt Render writes, cut into markers and plain text;
// adjacent plain pieces are merged, so no two plain pieces touch. A Jinja
// template that refuses the conversation is given it again with the roles
// made to alternate (see alternate), and nil when it refuses that too: use
// Prompt to see the error.
func (t *Template) Pieces(msgs []Message, addGenerationPrompt bool, think bool) []Piece {
	if t.jinja != nil {
		p, err := t.jinja.pieces(toolMessages(msgs), nil, addGenerationPrompt, think)
		if err != nil {
			p, _ = t.jinja.pieces(toolMessages(alternate(msgs)), nil, addGenerationPrompt, think)
		}
		return p
	}
	var b pieces
	if t.DefaultSystem != "" && (len(msgs) == 0 || msgs[0].Role != RoleSystem) {
		b.turn(RoleSystem, t.DefaultSystem)
	}
	lastUser := -1
	for i, m := range msgs {
		if m.Role == RoleUser {
			lastUser = i
		}
	}
	for i, m := range msgs {
		if m.Role != RoleAssistant || t.Kind != KindQwen3 {
			b.turn(m.Role, m.Content)
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
		b.turn(m.Role, content)
	}
	if addGenerationPrompt {
		b.special(IMStart)
		b.text(RoleAssistant + "\n")
		if t.Kind == KindQwen3 && !think {
			b.text(EmptyThink)
		}
	}
	return b.out
}

// Continue is the prompt of msgs, whose last message is the assistant's,
// with that message left open: rendered as a finished turn is, less its
// end-of-turn mark, so that generation continues the message (assistant
// prefill, as llama-server and Anthropic's API do). For Qwen3 the open
// message carries its think block, as the template writes the turn in
// progress.
//
// A Jinja template is given the message with a mark after its text, and the
// prompt is cut at the mark, as llama.cpp cuts its prefill: whatever the
// template writes after a message (Llama 3's <|eot_id|>) is left out.
func (t *Template) Continue(msgs []Message, think bool) []Piece {
	if t.jinja != nil && len(msgs) > 0 {
		ms := slices.Clone(msgs)
		ms[len(ms)-1].Content += prefillMark
		if out, ok := cutAtMark(t.Pieces(ms, false, think)); ok {
			return out
		}
		// The template dropped the message: the reply starts afresh.
		return t.Pieces(msgs[:len(msgs)-1], true, think)
	}
	out := t.Pieces(msgs, false, think)
	if n := len(out); n >= 2 && out[n-2].Special && out[n-2].Text == IMEnd && out[n-1].Text == "\n" {
		out = out[:n-2]
	}
	return out
}

// prefillMark is put after a continued message's text to find where the
// template wrote it: private-use runes, which no message has.
const prefillMark = "\uE000bonsai-prefill\uE000"

// cutAtMark is out up to prefillMark, and whether the mark was there.
func cutAtMark(out []Piece) ([]Piece, bool) {
	for i := len(out) - 1; i >= 0; i-- {
		if j := strings.LastIndex(out[i].Text, prefillMark); j >= 0 && !out[i].Special {
			out[i].Text = out[i].Text[:j]
			if out[i].Text == "" {
				return out[:i], true
			}
			return out[:i+1], true
		}
	}
	return nil, false
}

// pieces accumulates a prompt's pieces.
type pieces struct{ out []Piece }

func (b *pieces) special(s string) { b.out = append(b.out, Piece{Text: s, Special: true}) }

func (b *pieces) text(s string) {
	if s == "" {
		return
	}
	if n := len(b.out); n > 0 && !b.out[n-1].Special {
		b.out[n-1].Text += s
		return
	}
	b.out = append(b.out, Piece{Text: s})
}

func (b *pieces) turn(role, content string) {
	b.special(IMStart)
	b.text(role + "\n" + content)
	b.special(IMEnd)
	b.text("\n")
}
