// Package tokenizer turns text into token ids and back, matching llama.cpp
// token for token, for the vocabulary kinds GGUF files carry: byte-level BPE
// ("gpt2": GPT-2 style, as Qwen2/Qwen3, Llama 3 and Bonsai use),
// SentencePiece BPE ("llama": Llama 2, Mistral, Phi-3, Gemma 3; see spm.go)
// and Gemma 4's BPE over characters ("gemma4"; see rawbpe.go).
//
// Encoding runs in stages, as llama.cpp does: special tokens are cut out of
// the text first (control tokens only when the caller allows it,
// user-defined tokens always). For byte-level BPE each remaining fragment is
// split into words by the pre-tokenizer regex, and each word's bytes are
// merged by BPE rank; for SentencePiece each fragment, its spaces escaped,
// is merged by token score, and for Gemma 4 by merge rank.
//
// Which tokens count as control tokens, and which end generation, follows
// llama.cpp's load-time rules rather than the file's token types alone (see
// special.go).
package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// Token types, as ggml stores them in tokenizer.ggml.token_type.
const (
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// NoToken marks an absent special id.
const NoToken int32 = -1

var (
	// ErrUnsupported is returned for tokenizer models or pre-tokenizers this
	// package does not implement.
	ErrUnsupported = errors.New("unsupported tokenizer")
	// ErrInvalid is returned for vocabularies that contradict themselves.
	ErrInvalid = errors.New("invalid tokenizer data")
)

// Config is a vocabulary as GGUF stores it (tokenizer.ggml.*).
type Config struct {
	Model  string    // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece) or "gemma4" (see rawbpe.go)
	Pre    string    // tokenizer.ggml.pre: "qwen2", "qwen35", "llama-bpe", ...; BPE only
	Tokens []string  // id → text, in byte-level spelling (gpt2) or with "▁" for spaces (llama, gemma4)
	Types  []int32   // id → Type*; nil means all normal
	Merges []string  // "left right" pairs, highest priority first; gpt2 and gemma4
	Scores []float32 // id → score, highest merges first; SentencePiece only (nil: all 0)

	BOS, EOS, EOT, EOM, PAD int32 // NoToken when absent
	UNK                     int32 // SentencePiece: the token for a byte without a byte token; NoToken when absent
	AddBOS, AddEOS          bool  // prompts start with BOS, end with EOS (tokenizer.ggml.add_bos_token, add_eos_token)

	// AddSpacePrefix: for SentencePiece, a fragment at the start of the
	// text or after a special token gets a leading space before encoding;
	// for every kind, Detokenize drops the first token's leading space.
	AddSpacePrefix bool

	// RStripSpecials drops the whitespace that follows a special token in
	// the text: llama.cpp does so for Phi-3 models, which it recognises by
	// general.name (FromGGUF sets this the same way).
	RStripSpecials bool

	// FIM holds the fill-in-the-middle ids the file names; roles it lacks
	// (all of them when nil) are found by their text, as llama.cpp does.
	FIM map[FIMRole]int32
}

// modelKind is the tokenizer algorithm.
type modelKind uint8

const (
	kindBPE    modelKind = iota // byte-level BPE by merge rank
	kindSPM                     // SentencePiece BPE by token score
	kindRawBPE                  // BPE by merge rank over characters, "▁" for spaces (Gemma 4)
)

// Tokenizer is immutable after construction and safe for concurrent use.
type Tokenizer struct {
	kind   modelKind
	tokens []string
	types  []int32  // as the file stores them
	attrs  []attr   // after llama.cpp's load-time overrides
	pieces []string // decoded bytes of each token
	ids    map[string]int32
	merges map[uint64]merge
	// textMerges are kindRawBPE's merge ranks, by the texts of the sides.
	textMerges map[textPair]int32
	byteToken  [256]int32
	pre        preTokenizer
	scores     []float32 // SentencePiece merge scores
	// spaceJoins (SentencePiece, Gemma 4) are the characters a merge can
	// join to a "▁" after them: a fragment is cut into words before any
	// other "▁".
	spaceJoins map[rune]bool

	// specials are the tokens cut out before pre-tokenizing, longest first.
	specials []int32

	bos, eos, eot, pad, unk int32
	addBOS, addEOS          bool
	addSpacePrefix          bool
	cleanSpaces             bool // Detokenize tidies spaces before punctuation
	eog                     map[int32]bool

	cacheMu    sync.RWMutex
	cache      map[string][]int32
	cacheBytes int // what the cache's keys and ids hold, with cacheEntryCost each
}

// The per-word BPE cache (chat text repeats words a lot) is bounded in
// bytes, and cleared when full. Its keys are copies: a key that sliced the
// text it came from would keep a whole request's text alive. Words longer
// than maxCachedWord are not cached (they rarely repeat).
const (
	wordCacheBytes = 4 << 20
	maxCachedWord  = 256
	cacheEntryCost = 64 // a map entry's own bytes, beside its key and ids
)

// maxWordBytes bounds the bytes one BPE pass merges: a longer pre-token
// (a run of thousands of letters, or spaces) is merged in pieces of this
// size cut at character boundaries. Merging is O(n log n) in time and takes
// about 50 bytes of memory a byte, so an 8 MB word in one pass took 20 s
// and 1.3 GB; in pieces the cost is linear and small. No vocabulary token
// is near this long, so only the tokens at the cuts can differ from a
// single pass.
const maxWordBytes = 4096

// New builds a tokenizer from a vocabulary.
func New(c Config) (*Tokenizer, error) {
	t := &Tokenizer{
		tokens: c.Tokens,
		types:  c.Types,
		ids:    make(map[string]int32, len(c.Tokens)),
		addBOS: c.AddBOS,
		addEOS: c.AddEOS,
		unk:    NoToken,
		// llama.cpp reads add_space_prefix for every kind; only
		// SentencePiece encodes with it.
		addSpacePrefix: c.AddSpacePrefix,
		cache:          make(map[string][]int32),
	}
	switch c.Model {
	case "gpt2":
		t.kind = kindBPE
		pre, err := lookupPre(c.Pre)
		if err != nil {
			return nil, err
		}
		t.pre, t.cleanSpaces = pre, pre.cleanSpaces
	case "llama":
		t.kind = kindSPM
	case "gemma4":
		t.kind = kindRawBPE
		t.cleanSpaces = true
	default:
		return nil, fmt.Errorf("%w: tokenizer model %q (implemented: byte-level BPE \"gpt2\", SentencePiece \"llama\" and Gemma 4's \"gemma4\")", ErrUnsupported, c.Model)
	}
	if len(c.Tokens) == 0 {
		return nil, fmt.Errorf("%w: empty vocabulary", ErrInvalid)
	}
	if c.Types != nil && len(c.Types) != len(c.Tokens) {
		return nil, fmt.Errorf("%w: %d token types for %d tokens", ErrInvalid, len(c.Types), len(c.Tokens))
	}
	if c.Scores != nil && len(c.Scores) != len(c.Tokens) {
		return nil, fmt.Errorf("%w: %d token scores for %d tokens", ErrInvalid, len(c.Scores), len(c.Tokens))
	}
	// llama.cpp loads an empty token as "[EMPTY_<id>]", and matches and
	// prints it so.
	if slices.Contains(c.Tokens, "") {
		t.tokens = slices.Clone(c.Tokens)
		for i, s := range t.tokens {
			if s == "" {
				t.tokens[i] = fmt.Sprintf("[EMPTY_%d]", i)
			}
		}
		c.Tokens = t.tokens
	}
	if t.types == nil {
		t.types = make([]int32, len(c.Tokens))
		for i := range t.types {
			t.types[i] = TypeNormal
		}
	}
	for i, s := range c.Tokens {
		if _, dup := t.ids[s]; !dup { // the first spelling wins, as in llama.cpp
			t.ids[s] = int32(i)
		}
	}
	switch t.kind {
	case kindBPE:
		if err := t.loadMerges(c.Merges); err != nil {
			return nil, err
		}
	case kindSPM:
		t.scores = c.Scores
		t.unk = c.UNK
		t.fallbackByteTokens()
		t.spaceJoins = spaceJoins(c.Tokens)
	case kindRawBPE:
		t.loadTextMerges(c.Merges)
	}
	specials := specialIDs{eos: c.EOS, eot: c.EOT, eom: c.EOM}
	for role := range specials.fim {
		specials.fim[role] = NoToken
	}
	for role, id := range c.FIM {
		if role < 0 || role >= fimRoles {
			return nil, fmt.Errorf("%w: unknown FIM role %d", ErrInvalid, role)
		}
		specials.fim[role] = id
	}
	for _, id := range append([]int32{c.BOS, c.EOS, c.EOT, c.EOM, c.PAD, t.unk}, specials.fim[:]...) {
		if id != NoToken && (id < 0 || int(id) >= len(c.Tokens)) {
			return nil, fmt.Errorf("%w: special id %d outside the vocabulary of %d", ErrInvalid, id, len(c.Tokens))
		}
	}
	t.bos, t.eos, t.pad = c.BOS, c.EOS, c.PAD
	t.attrs = make([]attr, len(t.types))
	for i, typ := range t.types {
		t.attrs[i] = attrOfType(typ)
	}
	t.eot, _, t.eog = t.detectSpecials(t.attrs, specials)

	t.pieces = make([]string, len(c.Tokens))
	for i, s := range c.Tokens {
		a := t.attrs[i]
		switch {
		case a&(attrControl|attrUserDefined|attrUnknown) != 0:
			t.pieces[i] = s
			if s != "" {
				t.specials = append(t.specials, int32(i))
			}
		case a&attrNormal != 0 && t.kind != kindBPE:
			t.pieces[i] = strings.ReplaceAll(s, spaceMark, " ")
		case a&attrNormal != 0:
			t.pieces[i] = string(rawBytes(s))
		case a&attrByte != 0:
			t.pieces[i] = string([]byte{byteOfToken(s)})
		}
	}
	sort.SliceStable(t.specials, func(a, b int) bool {
		return len(t.tokens[t.specials[a]]) > len(t.tokens[t.specials[b]])
	})
	if c.RStripSpecials {
		t.rstripSpecials()
	}
	return t, nil
}

// loadMerges checks the byte-level vocabulary's byte tokens and ranks its
// merges.
func (t *Tokenizer) loadMerges(merges []string) error {
	for b := 0; b < 256; b++ {
		id, ok := t.ids[string(byteRunes[b])]
		switch {
		case !ok && b < utf8.RuneSelf:
			return fmt.Errorf("%w: no token for byte 0x%02x (%q)", ErrInvalid, b, string(byteRunes[b]))
		case !ok:
			// Some vocabularies (starcoder's, mpt's) leave out bytes that
			// valid UTF-8 never has, or only has in unassigned planes:
			// Encode drops such a byte (llama.cpp aborts on it).
			id = NoToken
		}
		t.byteToken[b] = id
	}
	t.merges = make(map[uint64]merge, len(merges))
	for rank, line := range merges {
		left, right, ok := strings.Cut(line, " ")
		if !ok {
			return fmt.Errorf("%w: merge %d %q has no space", ErrInvalid, rank, line)
		}
		l, lok := t.ids[left]
		r, rok := t.ids[right]
		res, resok := t.ids[left+right]
		if !lok || !rok || !resok {
			// Symbols are token ids here, so a merge whose parts or result
			// are not tokens could never apply or be emitted.
			return fmt.Errorf("%w: merge %d %q: parts or result not in the vocabulary", ErrInvalid, rank, line)
		}
		key := mergeKey(l, r)
		if _, dup := t.merges[key]; !dup {
			t.merges[key] = merge{rank: int32(rank), result: res}
		}
	}
	return nil
}

// rstripSpecials is llama.cpp's Phi-3 rule: every special token, and </s>,
// swallows the whitespace after it, except <unk>, <s> and <|endoftext|>.
func (t *Tokenizer) rstripSpecials() {
	for _, id := range t.specials {
		t.attrs[id] |= attrRStrip
	}
	if id, ok := t.ids["</s>"]; ok {
		t.attrs[id] |= attrRStrip
	}
	for _, text := range []string{"<unk>", "<s>", "<|endoftext|>"} {
		if id, ok := t.ids[text]; ok {
			t.attrs[id] &^= attrRStrip
		}
	}
}

// lookupPre maps tokenizer.ggml.pre to the regex variant it names, for the
// names llama.cpp gives these regexes.
func lookupPre(pre string) (preTokenizer, error) {
	switch pre {
	case "qwen2", "deepseek-r1-qwen":
		return preTokenizer{digitRun: 1}, nil
	case "stablelm2", "megrez":
		return preTokenizer{digitRun: 1, cleanSpaces: true}, nil
	case "qwen35":
		return preTokenizer{digitRun: 1, marksAreLetters: true}, nil
	case "llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral":
		return preTokenizer{digitRun: 3, ignoreMerges: true, cleanSpaces: true}, nil
	case "smaug-bpe", "dbrx":
		return preTokenizer{digitRun: 3, cleanSpaces: true}, nil
	case "gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4":
		return preTokenizer{gpt2: true, cleanSpaces: true}, nil
	case "smollm":
		return preTokenizer{gpt2: true, splitDigits: true}, nil
	case "starcoder", "refact", "codeshell", "exaone":
		return preTokenizer{gpt2: true, splitDigits: true, cleanSpaces: true}, nil
	}
	return preTokenizer{}, fmt.Errorf("%w: pre-tokenizer %q (implemented: qwen2, qwen35, llama-bpe, gpt-2, starcoder and their aliases)", ErrUnsupported, pre)
}

// Vocab is the number of token ids.
func (t *Tokenizer) Vocab() int { return len(t.tokens) }

// Token is a token's text as the vocabulary spells it ("Ġhello" for " hello").
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// Type is a token's type (TypeNormal, TypeControl, ...) as the file stores it;
// 0 for ids outside the vocabulary. Encode and IsEOG follow llama.cpp, which
// may treat a token as control whatever its stored type: see IsControl.
func (t *Tokenizer) Type(id int32) int32 {
	if id < 0 || int(id) >= len(t.types) {
		return 0
	}
	return t.types[id]
}

// IsControl reports whether llama.cpp treats id as a control token: one that
// Encode matches only with allowSpecial. That is its stored type, or a
// token llama.cpp recognises by its text (<|fim_prefix|>, <|im_end|>, ...).
func (t *Tokenizer) IsControl(id int32) bool {
	if id < 0 || int(id) >= len(t.attrs) {
		return false
	}
	return t.attrs[id]&attrControl != 0
}

// ID looks a token up by its vocabulary spelling.
func (t *Tokenizer) ID(text string) (int32, bool) {
	id, ok := t.ids[text]
	return id, ok
}

// BOS, EOS and EOT are the special ids (NoToken when the vocabulary has none).
func (t *Tokenizer) BOS() int32 { return t.bos }
func (t *Tokenizer) EOS() int32 { return t.eos }
func (t *Tokenizer) EOT() int32 { return t.eot }

// PAD is the padding id (NoToken when absent).
func (t *Tokenizer) PAD() int32 { return t.pad }

// AddBOS reports whether prompts should start with BOS
// (tokenizer.ggml.add_bos_token, or llama.cpp's default where the file has
// none: true for SentencePiece and Llama 3).
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether prompts should end with EOS (tokenizer.ggml.add_eos_token).
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// UNK is the unknown token SentencePiece encodes a byte without a byte
// token as (NoToken for BPE, or when absent).
func (t *Tokenizer) UNK() int32 { return t.unk }

// IsEOG reports whether id ends generation, by llama.cpp's rules: EOS, EOT and
// EOM, the FIM pad, repo and file-separator tokens, and the end-of-turn
// spellings it knows (<|im_end|>, <|endoftext|>, <|eot_id|>, ...).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// EOGs lists the ids that end generation, ascending.
func (t *Tokenizer) EOGs() []int32 {
	out := make([]int32, 0, len(t.eog))
	for id := range t.eog {
		out = append(out, id)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// Encode tokenizes text. With allowSpecial, control tokens written in the
// text (like "<|im_start|>"; see IsControl) become their ids; without it they are encoded as
// plain text. User-defined tokens (like "<think>") are matched either way, as
// llama.cpp does. BOS is never added here: callers that want it check
// AddBOS (and AddEOS). For BPE, invalid UTF-8 bytes are encoded as U+FFFD,
// as llama.cpp does; SentencePiece spells them with byte tokens, as
// llama.cpp does.
func (t *Tokenizer) Encode(text string, allowSpecial bool) []int32 {
	switch t.kind {
	case kindSPM:
		return t.encodeSPM(text, allowSpecial)
	case kindRawBPE:
		return t.encodeRawBPE(text, allowSpecial)
	}
	if !utf8.ValidString(text) {
		text = replaceInvalid(text)
	}
	var out []int32
	for _, f := range t.partition(text, allowSpecial) {
		if f.special {
			out = append(out, f.id)
			continue
		}
		splitWords(f.text, t.pre, func(word string) {
			out = t.encodeWord(word, out)
		})
	}
	return out
}

func (t *Tokenizer) encodeWord(word string, out []int32) []int32 {
	if len(word) > maxWordBytes {
		for len(word) > 0 {
			n := min(len(word), maxWordBytes)
			for n < len(word) && n > 0 && !utf8.RuneStart(word[n]) {
				n--
			}
			if n == 0 { // not UTF-8 (Encode replaced it): any cut will do
				n = min(len(word), maxWordBytes)
			}
			out = t.bpeWord(word[:n], out)
			word = word[n:]
		}
		return out
	}
	t.cacheMu.RLock()
	ids, ok := t.cache[word]
	t.cacheMu.RUnlock()
	if ok {
		return append(out, ids...)
	}
	if id, whole := t.ids[byteLevelText([]byte(word))]; whole && t.pre.ignoreMerges {
		ids = []int32{id}
	} else {
		ids = t.bpeWord(word, nil)
	}
	if len(word) <= maxCachedWord {
		t.remember(word, ids)
	}
	return append(out, ids...)
}

// remember caches a word's ids under a copy of the word.
func (t *Tokenizer) remember(word string, ids []int32) {
	cost := len(word) + 4*len(ids) + cacheEntryCost
	t.cacheMu.Lock()
	defer t.cacheMu.Unlock()
	if _, ok := t.cache[word]; ok {
		return
	}
	if t.cacheBytes+cost > wordCacheBytes {
		clear(t.cache)
		t.cacheBytes = 0
	}
	t.cache[strings.Clone(word)] = ids
	t.cacheBytes += cost
}

// replaceInvalid spells each byte that is not part of valid UTF-8 as U+FFFD.
func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// fragment is a piece of text to pre-tokenize, or one special token.
type fragment struct {
	text    string
	id      int32
	special bool
}

// partition cuts special tokens out of text, longest token first and each
// leftmost-first within the remaining text, like llama.cpp. A token with
// attrLStrip or attrRStrip takes the whitespace before or after it along.
func (t *Tokenizer) partition(text string, allowSpecial bool) []fragment {
	frags := []fragment{{text: text}}
	for _, id := range t.specials {
		a := t.attrs[id]
		if !allowSpecial && a&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.tokens[id]
		var next []fragment
		changed := false
		for _, f := range frags {
			if f.special || !strings.Contains(f.text, tok) {
				next = append(next, f)
				continue
			}
			changed = true
			rest := f.text
			for {
				i := strings.Index(rest, tok)
				if i < 0 {
					break
				}
				left := rest[:i]
				if a&attrLStrip != 0 {
					left = strings.TrimRight(left, cSpace)
				}
				if left != "" {
					next = append(next, fragment{text: left})
				}
				next = append(next, fragment{id: id, special: true})
				rest = rest[i+len(tok):]
				if a&attrRStrip != 0 {
					rest = strings.TrimLeft(rest, cSpace)
				}
			}
			if rest != "" {
				next = append(next, fragment{text: rest})
			}
		}
		if changed {
			frags = next
		}
	}
	return frags
}

// cSpace is what C's isspace counts as whitespace, which llama.cpp strips
// around special tokens.
const cSpace = " \t\n\v\f\r"

// Piece is the text a token stands for, as raw bytes (possibly part of a
// UTF-8 sequence), as llama.cpp's token_to_piece gives it with special
// tokens rendered. Control, unknown and user-defined tokens are their own
// text; a SentencePiece token's "▁" is a space; a byte token (<0xNN>) is its
// byte; unused and undefined tokens are empty.
func (t *Tokenizer) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// Decode joins the pieces of ids, as llama.cpp's server does for a stream of
// generated tokens. The result may contain invalid UTF-8 where ids end
// inside a character; stream with a StreamDecoder to avoid that.
func (t *Tokenizer) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(t.Piece(id))
	}
	return b.String()
}

// Detokenize turns a whole token sequence back into the text it encodes, as
// llama.cpp's llama_detokenize does with special tokens rendered: unlike
// Decode, it drops the leading space that SentencePiece's add_space_prefix
// put before the first token, and for the BPE vocabularies llama.cpp cleans
// up it removes the space before "?", "!", ".", "," and some contractions
// (clean_up_tokenization_spaces).
func (t *Tokenizer) Detokenize(ids []int32) string {
	var b []byte
	for i, id := range ids {
		p := t.Piece(id)
		if i == 0 && t.addSpacePrefix {
			p = strings.TrimPrefix(p, " ")
		}
		b = append(b, p...)
	}
	if t.cleanSpaces {
		b = cleanSpaces(b)
	}
	return string(b)
}

// cleanSpaces is llama.cpp's clean-up of detokenized BPE text, in its three
// in-place passes over the bytes: " ?", " !", " .", " ," lose the space; a
// lone "'" between spaces loses both; " 's", " 'm", " 're", " 've" lose the
// space (" 't", " 'd" and " 'll" keep it). The passes read bytes an earlier
// step may have rewritten, so they are kept in llama.cpp's form.
func cleanSpaces(text []byte) []byte {
	if len(text) == 0 {
		return text
	}
	n := len(text)
	total := 1
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		text[total] = x
		total++
	}
	n, total = total, 1
	for i := 1; i < n; i++ {
		x := text[i]
		if x == '\'' && i+1 < n && text[i-1] == ' ' && text[i+1] == ' ' {
			total--
			i++
			text[i] = 0
		}
		text[total] = x
		total++
	}
	n, total = total, 1
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < n {
			switch x1 := text[i+1]; {
			case x1 == 's' || x1 == 'm':
				total--
			case x1 == 't' || x1 == 'd':
			case i+2 < n:
				x2 := text[i+2]
				if (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e') {
					total--
				}
			}
		}
		text[total] = x
		total++
	}
	return text[:total]
}
