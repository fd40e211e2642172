package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// StreamDecoder turns tokens into text one at a time for streaming output. A
// token can end in the middle of a multi-byte character (emoji and CJK text
// often do, and SentencePiece's byte tokens always do); those bytes are held
// back until the character is complete, so every string returned is valid
// UTF-8. The text is Decode's: a SentencePiece reply's first token keeps its
// leading space, as llama.cpp's server streams it (Detokenize drops it for
// a text decoded from its start).
type StreamDecoder struct {
	tok     *Tokenizer
	pending []byte
}

// NewStreamDecoder starts a new stream.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder { return &StreamDecoder{tok: t} }

// Next adds one token and returns the text that is now complete (possibly "").
func (d *StreamDecoder) Next(id int32) string {
	d.pending = append(d.pending, d.tok.Piece(id)...)
	cut := completePrefix(d.pending)
	out := toValid(d.pending[:cut])
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return out
}

// Flush ends the stream, returning what was held back; bytes that never
// formed a character come out as U+FFFD.
func (d *StreamDecoder) Flush() string {
	out := toValid(d.pending)
	d.pending = d.pending[:0]
	return out
}

// completePrefix returns the length of b without a trailing incomplete (but so
// far valid) UTF-8 sequence.
func completePrefix(b []byte) int {
	// A sequence is at most 4 bytes: look at the last 3 for a lead byte.
	for back := 1; back <= 3 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c < utf8.RuneSelf {
			return len(b) // ASCII: nothing pending
		}
		if utf8.RuneStart(c) {
			need := seqLen(c)
			if need > back && !utf8.FullRune(b[len(b)-back:]) {
				return len(b) - back
			}
			return len(b)
		}
	}
	return len(b)
}

func seqLen(lead byte) int {
	switch {
	case lead&0xE0 == 0xC0:
		return 2
	case lead&0xF0 == 0xE0:
		return 3
	case lead&0xF8 == 0xF0:
		return 4
	}
	return 1
}

func toValid(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
