package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The qwen2 pre-tokenizer splits text with this regex before BPE:
//
//	(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
//	|[^\r\n\p{L}\p{N}]?\p{L}+
//	|\p{N}
//	| ?[^\s\p{L}\p{N}]+[\r\n]*
//	|\s*[\r\n]+
//	|\s+(?!\S)
//	|\s+
//
// Go's regexp has no lookahead, so splitWords scans by hand, trying the
// alternatives in order at each position exactly as a backtracking engine
// would (the first alternative that matches wins, each greedy). llama.cpp
// runs this regex through std::regex over a "collapsed" text in which every
// non-ASCII code point stands for its category; the classes below reproduce
// that: ASCII keeps C-locale meanings, non-ASCII White_Space is \s, and
// \p{L}/\p{N} are the Unicode letter and number categories.
//
// Two variants share this shape, described by a preTokenizer: llama3's
// regex differs only in taking digits three at a time (\p{N}{1,3}), and
// qwen35's only in counting combining marks as letters ([\p{L}\p{M}]+ for
// words, \p{M} excluded from the punctuation run) — which is the same as
// classifying marks as letters.

// GPT-2's own regex, which gpt-2, mpt, olmo and phi-2 files name, is
// simpler:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//
// (contractions in lower case only, a space attaches to the run after it,
// whatever that run is). llama.cpp adds a \s+ fallback for the whitespace
// that pattern leaves unmatched, and the starcoder family first cuts every
// digit out on its own (\p{N}) before applying it to the rest.
//
// llama3's vocabularies also set ignore_merges: a pre-token that is itself
// in the vocabulary is that one token, whatever the merges would make of it.

// preTokenizer selects the regex variant.
type preTokenizer struct {
	gpt2            bool // GPT-2's regex instead of qwen2's shape
	splitDigits     bool // gpt2: every \p{N} is a pre-token of its own first (starcoder)
	digitRun        int  // 1 (qwen2, qwen35) or 3 (llama3)
	marksAreLetters bool // qwen35
	ignoreMerges    bool // llama3: a pre-token in the vocabulary is one token
	cleanSpaces     bool // Detokenize drops spaces before punctuation (llama.cpp's clean_spaces)
}

type charClass uint8

const (
	classOther charClass = iota
	classLetter
	classNumber
	classSpace
)

func classify(r rune, marksAreLetters bool) charClass {
	if r < utf8.RuneSelf {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
			return classLetter
		case '0' <= r && r <= '9':
			return classNumber
		case r == ' ', '\t' <= r && r <= '\r':
			return classSpace
		}
		return classOther
	}
	switch {
	case unicode.Is(unicode.White_Space, r):
		return classSpace
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case marksAreLetters && unicode.IsMark(r):
		return classLetter
	}
	return classOther
}

// splitWords returns the pre-tokens of text, in order; their concatenation is
// text. Invalid UTF-8 bytes are single code points of class other.
func splitWords(text string, pre preTokenizer, emit func(word string)) {
	// Decode once: positions below are code point indexes.
	runes := make([]rune, 0, len(text))
	offsets := make([]int, 0, len(text)+1)
	for i, r := range text {
		runes = append(runes, r)
		offsets = append(offsets, i)
	}
	offsets = append(offsets, len(text))
	n := len(runes)
	classes := make([]charClass, n)
	for i, r := range runes {
		if r == utf8.RuneError {
			// A decoding error is one byte of class other; a literal U+FFFD
			// is a symbol: class other too.
			classes[i] = classOther
			continue
		}
		classes[i] = classify(r, pre.marksAreLetters)
	}
	isNewline := func(i int) bool { return i < n && (runes[i] == '\r' || runes[i] == '\n') }
	classAt := func(i int) charClass {
		if i < n {
			return classes[i]
		}
		return 255 // past the end: matches no class
	}

	if pre.gpt2 {
		for start := 0; start < n; {
			// The piece the GPT-2 regex runs over: the whole text, or
			// with splitDigits a single digit or the run up to the next.
			limit := n
			if pre.splitDigits {
				limit = start + 1
				for c := classes[start] == classNumber; limit < n && !c && classes[limit] != classNumber; limit++ {
				}
			}
			for pos := start; pos < limit; {
				end := matchGPT2(pos, limit, runes, classes)
				emit(text[offsets[pos]:offsets[end]])
				pos = end
			}
			start = limit
		}
		return
	}
	for pos := 0; pos < n; {
		end := matchAt(pos, n, runes, classAt, isNewline, pre.digitRun)
		emit(text[offsets[pos]:offsets[end]])
		pos = end
	}
}

// matchGPT2 returns the end of GPT-2's regex match (with llama.cpp's \s+
// fallback) that starts at pos, within [pos, limit).
func matchGPT2(pos, limit int, runes []rune, classes []charClass) int {
	classAt := func(i int) charClass {
		if i < limit {
			return classes[i]
		}
		return 255
	}
	// 's|'t|'re|'ve|'m|'ll|'d
	if runes[pos] == '\'' && pos+1 < limit {
		switch a := runes[pos+1]; {
		case a == 's' || a == 't' || a == 'm' || a == 'd':
			return pos + 2
		case pos+2 < limit && (a == 'r' && runes[pos+2] == 'e' || a == 'v' && runes[pos+2] == 'e' || a == 'l' && runes[pos+2] == 'l'):
			return pos + 3
		}
	}
	// ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': a run of one class,
	// with the space before it.
	start := pos
	if runes[pos] == ' ' && classAt(pos+1) != classSpace && pos+1 < limit {
		start = pos + 1
	}
	if c := classAt(start); c != classSpace {
		end := start + 1
		for classAt(end) == c {
			end++
		}
		return end
	}
	spaces := 0
	for classAt(pos+spaces) == classSpace {
		spaces++
	}
	// \s+(?!\S): the run minus its last space when something follows it.
	if spaces > 1 && pos+spaces < limit {
		return pos + spaces - 1
	}
	// \s+
	return pos + spaces
}

// matchAt returns the end of the regex match that starts at pos (always > pos:
// every code point is matched by some alternative).
func matchAt(pos, n int, runes []rune, classAt func(int) charClass, isNewline func(int) bool, digitRun int) int {
	r := runes[pos]
	c := classAt(pos)

	// '[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]
	if r == '\'' {
		if end := contractionEnd(runes, pos); end > pos {
			return end
		}
	}

	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == classLetter || (c != classNumber && !isNewline(pos) && classAt(pos+1) == classLetter) {
		end := pos + 1
		for classAt(end) == classLetter {
			end++
		}
		return end
	}

	// \p{N} (qwen2) or \p{N}{1,3} (llama3)
	if c == classNumber {
		end := pos + 1
		for end-pos < digitRun && classAt(end) == classNumber {
			end++
		}
		return end
	}

	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	start := pos
	if r == ' ' && classAt(pos+1) == classOther {
		start = pos + 1
	}
	if classAt(start) == classOther {
		end := start + 1
		for classAt(end) == classOther {
			end++
		}
		for isNewline(end) {
			end++
		}
		return end
	}

	// What is left starts with whitespace.
	spaces, lastNewlineEnd := 0, -1
	for classAt(pos+spaces) == classSpace {
		if isNewline(pos + spaces) {
			lastNewlineEnd = pos + spaces + 1
		}
		spaces++
	}
	// \s*[\r\n]+ : greedy \s* backs off to the last newline of the run.
	if lastNewlineEnd >= 0 {
		return lastNewlineEnd
	}
	// \s+(?!\S) : the run minus its last space when something follows it.
	if spaces > 1 && pos+spaces < n {
		return pos + spaces - 1
	}
	// \s+
	return pos + spaces
}

// contractionEnd returns the end of an English contraction ('s, 't, 're, 've,
// 'm, 'll, 'd in either case, ASCII only) starting at the apostrophe at pos,
// or pos if there is none.
func contractionEnd(runes []rune, pos int) int {
	lower := func(i int) rune {
		if i >= len(runes) {
			return 0
		}
		r := runes[i]
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	switch a, b := lower(pos+1), lower(pos+2); {
	case a == 's' || a == 't' || a == 'm' || a == 'd':
		return pos + 2
	case (a == 'r' || a == 'v') && b == 'e', a == 'l' && b == 'l':
		return pos + 3
	}
	return pos
}
