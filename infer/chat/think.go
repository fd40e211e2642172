package chat

import "strings"

// Segment is a run of generated text, either reasoning or answer.
type Segment struct {
	Text     string
	Thinking bool
}

// ThinkTags are the markers a family's reasoning sits between.
type ThinkTags struct {
	Open, Close string
}

// Reasoning markers: Qwen3's, DeepSeek R1's and most others', and
// Mistral's reasoning models' (Magistral, Ministral 3 Reasoning).
var (
	DefaultThinkTags = ThinkTags{Open: ThinkOpen, Close: ThinkClose}
	MistralThinkTags = ThinkTags{Open: "[THINK]", Close: "[/THINK]"}
)

// ThinkParser splits streamed model output into reasoning (inside its
// tags, <think>…</think> by default) and answer text. Tags may arrive split across chunks:
// text that could be the start of a tag is held back until it is decided.
// Newlines right after a tag and right before </think> are layout, not text,
// and are dropped.
type ThinkParser struct {
	tags      ThinkTags
	inThink   bool
	seenThink bool   // a think block was opened or closed: no second one
	atStart   bool   // at the start of a section: drop leading newlines
	held      string // undecided text: a possible tag prefix, or newlines before </think>
}

// NewThinkParser starts a parser of <think>…</think>. inThink is true when
// the prompt already opened the think block (the model's first tokens are
// reasoning).
func NewThinkParser(inThink bool) *ThinkParser {
	return NewThinkParserTags(DefaultThinkTags, inThink)
}

// NewThinkParserTags starts a parser of reasoning between tags
// (Template.ThinkTags); inThink as NewThinkParser's.
func NewThinkParserTags(tags ThinkTags, inThink bool) *ThinkParser {
	return &ThinkParser{tags: tags, inThink: inThink, seenThink: inThink, atStart: true}
}

// Thinking reports whether the parser is inside a think block.
func (p *ThinkParser) Thinking() bool { return p.inThink }

// Feed adds a chunk of output and returns the segments now decided.
func (p *ThinkParser) Feed(chunk string) []Segment {
	var out []Segment
	text := p.held + chunk
	p.held = ""
	for text != "" {
		tag := p.tags.Close
		if !p.inThink {
			if p.seenThink {
				out = p.emit(out, text)
				return out
			}
			tag = p.tags.Open
		}
		if i := strings.Index(text, tag); i >= 0 {
			before := text[:i]
			if p.inThink {
				before = strings.TrimRight(before, "\n")
			} else if strings.TrimSpace(before) != "" {
				// Answer text before any opening tag: the model
				// skipped reasoning; a later one is just text.
				p.seenThink = true
				out = p.emit(out, text)
				return out
			}
			out = p.emit(out, before)
			p.inThink = !p.inThink
			p.seenThink = true
			p.atStart = true
			text = text[i+len(tag):]
			continue
		}
		// No whole tag: hold back a suffix that may begin one, and inside
		// the think block trailing newlines that may precede </think>.
		keep := partialSuffix(text, tag)
		ready := text[:len(text)-keep]
		if p.inThink {
			trimmed := strings.TrimRight(ready, "\n")
			keep += len(ready) - len(trimmed)
			ready = trimmed
		} else if strings.TrimSpace(ready) != "" {
			p.seenThink = true // answer started without a think block
		}
		out = p.emit(out, ready)
		p.held = text[len(text)-keep:]
		break
	}
	return out
}

// Flush ends the stream, returning any held-back text.
func (p *ThinkParser) Flush() []Segment {
	text := p.held
	p.held = ""
	if p.inThink {
		text = strings.TrimRight(text, "\n")
	}
	return p.emit(nil, text)
}

// emit appends text to the current section, dropping a section's leading
// newlines and merging with the previous segment of the same kind.
func (p *ThinkParser) emit(out []Segment, text string) []Segment {
	if p.atStart {
		text = strings.TrimLeft(text, "\n")
		if text == "" {
			return out
		}
		p.atStart = false
	}
	if text == "" {
		return out
	}
	if n := len(out); n > 0 && out[n-1].Thinking == p.inThink {
		out[n-1].Text += text
		return out
	}
	return append(out, Segment{Text: text, Thinking: p.inThink})
}

// partialSuffix is the length of the longest proper prefix of tag that text
// ends with.
func partialSuffix(text, tag string) int {
	for n := min(len(tag)-1, len(text)); n > 0; n-- {
		if strings.HasSuffix(text, tag[:n]) {
			return n
		}
	}
	return 0
}

// SplitThinking splits a complete reply into its reasoning (in <think>
// blocks) and its answer.
func SplitThinking(text string) (thinking, content string) {
	return SplitThinkingTags(DefaultThinkTags, text)
}

// SplitThinkingTags splits a complete reply into its reasoning, between
// tags, and its answer.
func SplitThinkingTags(tags ThinkTags, text string) (thinking, content string) {
	inThink := !strings.Contains(text, tags.Open) && strings.Contains(text, tags.Close)
	p := NewThinkParserTags(tags, inThink)
	var tb, cb strings.Builder
	for _, s := range append(p.Feed(text), p.Flush()...) {
		if s.Thinking {
			tb.WriteString(s.Text)
		} else {
			cb.WriteString(s.Text)
		}
	}
	return tb.String(), cb.String()
}
