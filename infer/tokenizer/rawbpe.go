package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Gemma 4's tokenizer (tokenizer.ggml.model "gemma4") is BPE by merge rank,
// as byte-level BPE is, but over the text as SentencePiece sees it, as
// llama.cpp runs it (its GEMMA4 pre-tokenizer with byte_encode off):
//
//   - Spaces become "▁"; there is no space prefix.
//   - The text is split into runs of newlines and runs of anything else. A
//     run of newlines that is a token is that token.
//   - Each run starts as one symbol per UTF-8 character (not per byte) and
//     merges pairs by the rank of their texts in the merges list, the
//     leftmost on ties.
//   - A final symbol that is not a token is spelled with <0xNN> byte tokens
//     (bytes without one are dropped).
//
// A run is cut before each "▁" whose preceding character ends no merge's
// left side whose right side starts with "▁": no merge can span such a
// cut, so the pieces merge apart to the same tokens (see spaceJoins for
// SentencePiece).

// textPair is a merge's two sides.
type textPair struct{ left, right string }

// loadTextMerges ranks a raw-text BPE vocabulary's merges. llama.cpp cuts
// each line at its first space after the first byte (so a left side may be
// a space), and the first rank of a pair wins.
func (t *Tokenizer) loadTextMerges(merges []string) {
	t.textMerges = make(map[textPair]int32, len(merges))
	t.spaceJoins = map[rune]bool{}
	// Backwards, so that the first rank of a pair is the one left, with one
	// map access a merge: the map outgrows the caches, and a lookup before
	// each store made Gemma 4's load 1.1–1.4 s instead of 0.95 s here.
	for rank := len(merges) - 1; rank >= 0; rank-- {
		line := merges[rank]
		var p textPair
		if i := strings.IndexByte(line[min(1, len(line)):], ' '); i >= 0 {
			i += min(1, len(line))
			p = textPair{line[:i], line[i+1:]}
		}
		t.textMerges[p] = int32(rank)
		if strings.HasPrefix(p.right, spaceMark) {
			if r, size := utf8.DecodeLastRuneInString(p.left); size > 0 {
				t.spaceJoins[r] = true
			} else {
				t.spaceJoins[utf8.RuneError] = true
			}
		}
	}
	const hex = "0123456789ABCDEF"
	for b := 0; b < 256; b++ {
		id, ok := t.ids[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]
		if !ok {
			id = NoToken
		}
		t.byteToken[b] = id
	}
}

// encodeRawBPE is Encode for Gemma 4's vocabulary.
func (t *Tokenizer) encodeRawBPE(text string, allowSpecial bool) []int32 {
	if !utf8.ValidString(text) {
		text = replaceInvalid(text)
	}
	var out []int32
	for _, f := range t.partition(text, allowSpecial) {
		if f.special {
			out = append(out, f.id)
			continue
		}
		s := strings.ReplaceAll(f.text, " ", spaceMark)
		for len(s) > 0 {
			n := strings.IndexByte(s, '\n')
			if n == 0 {
				n = len(s) - len(strings.TrimLeft(s, "\n"))
				if id, ok := t.ids[s[:n]]; ok {
					out = append(out, id)
				} else {
					out = t.rawBPEWord(s[:n], out)
				}
			} else {
				if n < 0 {
					n = len(s)
				}
				t.spmWords(s[:n], func(word string) { out = t.rawBPEWord(word, out) })
			}
			s = s[n:]
		}
	}
	return out
}

// rawBPEWord merges one word (through the word cache) and appends its ids.
func (t *Tokenizer) rawBPEWord(word string, out []int32) []int32 {
	if len(word) > maxCachedWord {
		for _, piece := range longWordPieces(word) {
			out = t.mergeRawBPE(piece, out)
		}
		return out
	}
	t.cacheMu.RLock()
	ids, ok := t.cache[word]
	t.cacheMu.RUnlock()
	if !ok {
		ids = t.mergeRawBPE(word, nil)
		t.remember(word, ids)
	}
	return append(out, ids...)
}

// mergeRawBPE merges word's characters by merge rank and appends the ids.
// It is SentencePiece's merge with the negated rank as the score: the
// lowest rank, then the leftmost pair, goes first; a piece the vocabulary
// lacks is spelled with the byte tokens it has.
func (t *Tokenizer) mergeRawBPE(word string, out []int32) []int32 {
	rank := func(l, r spmSymbol) (float32, bool) {
		rank, ok := t.textMerges[textPair{word[l.start : l.start+l.n], word[r.start : r.start+r.n]}]
		return -float32(rank), ok
	}
	spell := func(out []int32, b byte) []int32 {
		if id := t.byteToken[b]; id != NoToken {
			return append(out, id)
		}
		return out
	}
	out, _, _ = t.mergeSymbols(word, out, nil, nil, rank, spell)
	return out
}
