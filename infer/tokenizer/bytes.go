package tokenizer

import "unicode/utf8"

// Byte-level BPE (GPT-2 and its descendants, Qwen included) never sees raw
// bytes: each byte is first replaced by a printable code point so that merges
// and vocab entries are ordinary text. Printable Latin-1 bytes stand for
// themselves; the other 68 bytes are mapped, in byte order, to U+0100 and up.

// byteRunes maps a byte to the code point that stands for it in the vocab.
var byteRunes [256]rune

// runeBytes maps such a code point back to its byte; -1 if it stands for none.
var runeBytes = map[rune]int{}

func init() {
	next := rune(256)
	for b := 0; b < 256; b++ {
		if printableLatin1(b) {
			byteRunes[b] = rune(b)
		} else {
			byteRunes[b] = next
			next++
		}
		runeBytes[byteRunes[b]] = b
	}
}

func printableLatin1(b int) bool {
	return ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF)
}

// byteLevelText is the vocab spelling of raw bytes.
func byteLevelText(raw []byte) string {
	out := make([]byte, 0, 2*len(raw))
	for _, b := range raw {
		out = utf8.AppendRune(out, byteRunes[b])
	}
	return string(out)
}

// rawBytes undoes byteLevelText. Code points that stand for no byte (they
// only occur in hand-made vocabs) are kept as their own UTF-8 so nothing is
// silently dropped.
func rawBytes(text string) []byte {
	out := make([]byte, 0, len(text))
	for _, r := range text {
		if b, ok := runeBytes[r]; ok {
			out = append(out, byte(b))
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}
