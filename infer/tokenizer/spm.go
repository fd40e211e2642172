package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// SentencePiece BPE ("llama" in tokenizer.ggml.model: Llama 2, Mistral,
// TinyLlama, Phi-3, Gemma 1–3) as llama.cpp runs it (llm_tokenizer_spm in
// src/llama-vocab.cpp), which is not quite SentencePiece's own algorithm:
//
//   - Each text fragment between special tokens gets a leading space when the
//     vocabulary asks for one (add_space_prefix) and the fragment starts the
//     text or follows a special token; then every space becomes "▁" (U+2581).
//   - The fragment starts as one symbol per UTF-8 character, the length read
//     off the lead byte alone (a stray continuation byte is a character of
//     its own; a truncated sequence ends at the text's end).
//   - Repeatedly, of all adjacent pairs whose concatenation is a token, the
//     one with the highest score merges, the leftmost on ties. A pair is
//     judged by its text's token, whatever its type: control tokens merge
//     like any other.
//   - A final symbol that is a token is that token; any other (a character
//     the vocabulary lacks) is spelled with byte tokens, <0xNN>, one a byte.
//
// There is no pre-tokenizer: the whole fragment merges as one word. But a
// merge only ever forms a token, so no merge spans two adjacent characters
// that no token holds side by side. SentencePiece vocabularies put "▁" at
// the start of pieces, so most "▁"s can be cut before and the pieces merged
// apart, giving the same tokens (with memory that no longer grows with the
// prompt, and a word cache like BPE's): see spaceJoins.

// spmSymbol is a span of the fragment: what has merged so far.
type spmSymbol struct {
	start, n   int32 // byte span; n is 0 once merged into its left neighbour
	prev, next int32 // -1 at the ends
}

// spmBigram is an adjacent pair whose text is a token, with that token's
// score. It is stale once either side has merged with something else, which
// size detects: sides only grow.
type spmBigram struct {
	score       float32
	left, right int32
	size        int32
}

// before orders the queue: highest score first, then leftmost.
func (a spmBigram) before(b spmBigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

// spmQueue is a binary heap of bigrams (container/heap's interface calls
// cost a third of the encoding time).
type spmQueue []spmBigram

func (q *spmQueue) push(b spmBigram) {
	h := append(*q, b)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	*q = h
}

func (q *spmQueue) pop() spmBigram {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].before(h[m]) {
			m = l
		}
		if r < len(h) && h[r].before(h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// utf8Len is a character's length by its lead byte, as llama.cpp reads it
// (unicode_len_utf8): continuation and invalid bytes count as one, 0xF8 and
// up as four.
func utf8Len(lead byte) int {
	switch lead >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// spaceMark is SentencePiece's visible space, U+2581.
const spaceMark = "\u2581"

// spaceJoins finds the characters that some token has right before a "▁":
// the fragment may be cut before any other "▁".
func spaceJoins(tokens []string) map[rune]bool {
	joins := map[rune]bool{}
	for _, tok := range tokens {
		prev := rune(-1)
		for i, r := range tok {
			if prev >= 0 && strings.HasPrefix(tok[i:], spaceMark) {
				joins[prev] = true
			}
			prev = r
		}
	}
	return joins
}

// spmWords calls emit with the pieces of an escaped fragment that merge
// apart: it cuts before each "▁" whose preceding character no token has
// before a "▁". A cut never falls inside a character as llama.cpp reads
// characters, nor after one that is not valid UTF-8 (whose bytes a token
// could end with).
func (t *Tokenizer) spmWords(s string, emit func(word string)) {
	start := 0
	prev := utf8.RuneError
	for off := 0; off < len(s); {
		if off > start && strings.HasPrefix(s[off:], spaceMark) && prev != utf8.RuneError && !t.spaceJoins[prev] {
			emit(s[start:off])
			start = off
		}
		n := min(utf8Len(s[off]), len(s)-off)
		r, size := utf8.DecodeRuneInString(s[off : off+n])
		if size != n {
			r = utf8.RuneError // not one whole character: never cut after it
		}
		prev = r
		off += n
	}
	if start < len(s) {
		emit(s[start:])
	}
}

// maxMergeBytes bounds the bytes one SentencePiece or Gemma 4 merge pass
// takes: a longer word (a run with no cut, like 8 MB of "a", which took
// 7.7 s and 900 MB in one pass) is merged in pieces of this size cut at
// characters. Only the tokens at those cuts can differ from llama.cpp's,
// and only in words far longer than text has: a 64 KB paragraph of
// unspaced CJK is still one pass.
const maxMergeBytes = 64 << 10

// longWordPieces cuts a word into pieces of at most maxMergeBytes, at
// characters as llama.cpp reads them.
func longWordPieces(word string) []string {
	var pieces []string
	for len(word) > maxMergeBytes {
		n := 0
		for n < len(word) {
			next := n + utf8Len(word[n])
			if next > maxMergeBytes {
				break
			}
			n = next
		}
		pieces = append(pieces, word[:n])
		word = word[n:]
	}
	return append(pieces, word)
}

// encodeSPM is Encode for SentencePiece vocabularies.
func (t *Tokenizer) encodeSPM(text string, allowSpecial bool) []int32 {
	if text == "" {
		return nil
	}
	var out []int32
	var syms []spmSymbol
	var queue spmQueue
	prevSpecial := true // the text's start counts as following a special token
	for _, f := range t.partition(text, allowSpecial) {
		if f.special {
			out = append(out, f.id)
			prevSpecial = true
			continue
		}
		s := f.text
		if t.addSpacePrefix && prevSpecial {
			s = " " + s
		}
		prevSpecial = false
		s = strings.ReplaceAll(s, " ", spaceMark)
		t.spmWords(s, func(word string) {
			if len(word) > maxCachedWord {
				for _, piece := range longWordPieces(word) {
					out, syms, queue = t.spmFragment(piece, out, syms[:0], queue[:0])
				}
				return
			}
			t.cacheMu.RLock()
			ids, ok := t.cache[word]
			t.cacheMu.RUnlock()
			if !ok {
				ids, syms, queue = t.spmFragment(word, nil, syms[:0], queue[:0])
				t.remember(word, ids)
			}
			out = append(out, ids...)
		})
	}
	return out
}

// spmFragment merges one escaped fragment and appends its ids to out; syms
// and queue are scratch space, returned for reuse.
func (t *Tokenizer) spmFragment(s string, out []int32, syms []spmSymbol, queue spmQueue) ([]int32, []spmSymbol, spmQueue) {
	score := func(l, r spmSymbol) (float32, bool) {
		id, ok := t.ids[s[l.start:l.start+l.n+r.n]]
		return t.score(id), ok
	}
	return t.mergeSymbols(s, out, syms, queue, score, t.appendByte)
}

// mergeSymbols splits s into its UTF-8 characters and merges neighbours,
// the best-scored pair first (the leftmost of equals; score's ok false: the
// pair never merges), then appends each symbol's id to out, or spells a
// symbol the vocabulary lacks byte by byte with spell. syms and queue are
// scratch space, returned for reuse.
func (t *Tokenizer) mergeSymbols(s string, out []int32, syms []spmSymbol, queue spmQueue,
	score func(l, r spmSymbol) (float32, bool), spell func(out []int32, b byte) []int32) ([]int32, []spmSymbol, spmQueue) {
	for off := 0; off < len(s); {
		n := min(utf8Len(s[off]), len(s)-off)
		i := int32(len(syms))
		syms = append(syms, spmSymbol{start: int32(off), n: int32(n), prev: i - 1, next: i + 1})
		off += n
	}
	if len(syms) == 0 {
		return out, syms, queue
	}
	syms[len(syms)-1].next = -1
	tryPair := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		if sc, ok := score(l, r); ok {
			queue.push(spmBigram{score: sc, left: left, right: right, size: l.n + r.n})
		}
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		tryPair(i-1, i)
	}
	for len(queue) > 0 {
		b := queue.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size || l.next != b.right {
			continue // a side has merged since this pair was queued
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryPair(l.prev, b.left)
		tryPair(b.left, l.next)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		sym := syms[i]
		piece := s[sym.start : sym.start+sym.n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			out = spell(out, piece[j])
		}
	}
	return out, syms, queue
}

// appendByte spells one byte with its byte token. A vocabulary without one
// gets the unknown token there (llama.cpp aborts), or nothing if it has none.
func (t *Tokenizer) appendByte(out []int32, b byte) []int32 {
	switch {
	case t.byteToken[b] != NoToken:
		return append(out, t.byteToken[b])
	case t.unk != NoToken:
		return append(out, t.unk)
	}
	return out
}

// score is a token's SentencePiece score (0 where the file has none).
func (t *Tokenizer) score(id int32) float32 {
	if int(id) < len(t.scores) {
		return t.scores[id]
	}
	return 0
}

// fallbackByteTokens finds each byte's token in a vocabulary that spells
// bytes as <0xNN> (SentencePiece's byte fallback), or, failing that, as the
// byte itself, as llama.cpp's byte_to_token does.
func (t *Tokenizer) fallbackByteTokens() {
	const hex = "0123456789ABCDEF"
	for b := 0; b < 256; b++ {
		id, ok := t.ids[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]
		if !ok {
			id, ok = t.ids[string([]byte{byte(b)})]
		}
		if !ok {
			id = NoToken
		}
		t.byteToken[b] = id
	}
}

// byteOfToken is the byte a byte-type token stands for: the two characters
// after "<0x" read as hex, as llama.cpp's token_to_byte reads them (strtol:
// it stops at the first non-hex character, and reads nothing as 0).
func byteOfToken(text string) byte {
	var v byte
	for i := 3; i < 5 && i < len(text); i++ {
		c := text[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return v
		}
		v = v<<4 | d
	}
	return v
}
