package tokenizer

// llama.cpp does not take a vocabulary's token types at face value: when it
// loads one (llama_vocab::impl::load in src/llama-vocab.cpp) it recognises
// end-of-turn, fill-in-the-middle and end-of-generation tokens by their text,
// makes them control tokens whatever the file says, and builds the set of
// tokens that end generation from them. Qwen3, for one, marks <|fim_prefix|>
// and <|file_sep|> user-defined; llama.cpp still treats them as control
// tokens, so they are plain text unless special tokens are parsed, and
// <|fim_pad|>, <|repo_name|> and <|file_sep|> stop generation. This file
// repeats those rules, with llama.cpp's text lists, so that bonsai tokenizes
// and stops where llama.cpp does.

// attr is a token's attribute bits, as llama.cpp's llama_token_attr keeps
// them: unlike a token type, a token can be, say, user-defined and control.
type attr uint32

const (
	attrUndefined   attr = 0
	attrUnknown     attr = 1 << 0
	attrUnused      attr = 1 << 1
	attrNormal      attr = 1 << 2
	attrControl     attr = 1 << 3
	attrUserDefined attr = 1 << 4
	attrByte        attr = 1 << 5
	// attrLStrip and attrRStrip: the token takes the whitespace before or
	// after it in the text along when it is cut out (llama.cpp sets them by
	// model name, not from the file: see rstripSpecials).
	attrLStrip attr = 1 << 7
	attrRStrip attr = 1 << 8
)

// attrOfType is the attribute a GGUF token type starts as; types ggml does
// not define are undefined, as in llama.cpp.
func attrOfType(typ int32) attr {
	switch typ {
	case TypeNormal:
		return attrNormal
	case TypeUnknown:
		return attrUnknown
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDefined
	case TypeUnused:
		return attrUnused
	case TypeByte:
		return attrByte
	}
	return attrUndefined
}

// FIMRole names a fill-in-the-middle token.
type FIMRole int

const (
	FIMPrefix  FIMRole = iota // tokenizer.ggml.fim_pre_token_id
	FIMSuffix                 // tokenizer.ggml.fim_suf_token_id
	FIMMiddle                 // tokenizer.ggml.fim_mid_token_id
	FIMPad                    // tokenizer.ggml.fim_pad_token_id
	FIMRepo                   // tokenizer.ggml.fim_rep_token_id
	FIMFileSep                // tokenizer.ggml.fim_sep_token_id
	fimRoles
)

// eotTexts are the spellings llama.cpp takes for the end-of-turn token when
// the file names none.
var eotTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
	"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
	"<end_of_utterance>",
}

// eomTexts are the spellings of the end-of-message token (Llama 3.1 tools).
var eomTexts = []string{"<|eom_id|>"}

// fimTexts are the spellings llama.cpp takes for each FIM role the file does
// not name.
var fimTexts = [fimRoles][]string{
	FIMPrefix:  {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"},
	FIMSuffix:  {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"},
	FIMMiddle:  {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"},
	FIMPad:     {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
	FIMRepo:    {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
	FIMFileSep: {"<|file_sep|>"},
}

// eogTexts are the tokens that end generation wherever a vocabulary has them.
var eogTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
	"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
	"_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
	"<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
}

// alwaysRendered are gpt-oss (harmony) tokens llama.cpp makes user-defined, so
// they are matched in text and printed even without special-token handling.
var alwaysRendered = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}

// specialIDs are the ids the file names (NoToken where it names none).
type specialIDs struct {
	eos, eot, eom int32
	fim           [fimRoles]int32
}

// detectSpecials applies llama.cpp's load-time rules to attrs (indexed by id)
// and returns the end-of-turn and end-of-message ids, now filled in from the
// text where the file gave none, and the set of tokens that end generation.
//
// Where a vocabulary holds several spellings of one role, llama.cpp takes
// whichever its hash map yields first; this takes the first in list order.
// That only decides which of them EOT() reports or, for a vocabulary with two
// spellings of a FIM pad/repo/separator token, which one ends generation.
func (t *Tokenizer) detectSpecials(attrs []attr, s specialIDs) (eot, eom int32, eog map[int32]bool) {
	find := func(texts []string) int32 {
		for _, text := range texts {
			if id, ok := t.ids[text]; ok {
				return id
			}
		}
		return NoToken
	}
	// A role found by its text is a control token: the file marking it
	// user-defined or normal is taken for a conversion bug.
	detect := func(id int32, texts []string) int32 {
		if id != NoToken {
			return id
		}
		if id = find(texts); id != NoToken {
			attrs[id] |= attrControl
		}
		return id
	}
	eot = detect(s.eot, eotTexts)
	eom = detect(s.eom, eomTexts)
	fim := s.fim
	for role := range fim {
		fim[role] = detect(fim[role], fimTexts[role])
	}

	eog = map[int32]bool{}
	for _, role := range []FIMRole{FIMPad, FIMRepo, FIMFileSep} {
		if fim[role] != NoToken {
			eog[fim[role]] = true
		}
	}
	for _, text := range eogTexts {
		if id, ok := t.ids[text]; ok {
			eog[id] = true
			attrs[id] |= attrControl
		}
	}
	for _, text := range alwaysRendered {
		if id, ok := t.ids[text]; ok {
			attrs[id] = attrUserDefined
		}
	}
	for _, id := range []int32{s.eos, eot, eom} {
		if id != NoToken {
			eog[id] = true
		}
	}

	// Harmony (gpt-oss) and solar-open end a message with <|end|> but keep
	// generating after it: with their <|return|>/<|call|> or <|calls|>/<|flush|>
	// present, <|end|> neither ends generation nor is a control token.
	has := func(text string) (int32, bool) {
		id, ok := t.ids[text]
		return id, ok && eog[id]
	}
	end, hasEnd := has("<|end|>")
	_, hasReturn := has("<|return|>")
	_, hasCall := has("<|call|>")
	_, hasCalls := has("<|calls|>")
	_, hasFlush := has("<|flush|>")
	hasCall = hasCall || hasCalls
	if hasEnd && ((hasReturn && hasCall) || (hasCall && hasFlush)) {
		delete(eog, end)
		attrs[end] = attrUserDefined
	}
	// Gemma 4 and PaddleOCR: </s> is ordinary text next to <|tool_response>.
	if _, hasToolResponse := has("<|tool_response>"); hasToolResponse {
		if s, hasS := has("</s>"); hasS {
			delete(eog, s)
			attrs[s] = attrNormal
		}
	}
	return eot, eom, eog
}
