// Package spec is speculative decoding's parts: a drafter proposes the
// next few tokens, the scheduler (infer/slots, the one decode loop)
// verifies them in the pass that runs the next token and keeps those the
// sampled tokens confirm, taking back the rest.
// Decoding a 1-bit model is bound by reading the weights once per pass, so
// verifying k tokens costs little more than decoding one.
//
// The output is the target's, exactly: at temperature 0 token for token
// what plain decoding gives, and with sampling a draw from the same
// distribution (rejection sampling, accept.go). Two drafters: prompt lookup
// (Ngram, no second model: the continuation of an earlier occurrence of the
// last few tokens, which pays when the reply quotes the conversation) and a
// smaller model with the same vocabulary (ModelDrafter). An adaptive draft
// length (adapt.go) grows while drafts are accepted, shrinks when they are
// not, and stops drafting while the measured speed-up is below one.
package spec

import (
	"errors"
	"fmt"
	"strings"
)

// Mode chooses the drafter.
type Mode string

const (
	Off   Mode = "off"   // plain decoding
	NGram Mode = "ngram" // prompt lookup
	Draft Mode = "draft" // a draft model
)

// ParseMode reads a mode as flags and config files spell it; "" and "none"
// are Off.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "off", "none":
		return Off, nil
	case "ngram", "lookup":
		return NGram, nil
	case "draft":
		return Draft, nil
	}
	return Off, fmt.Errorf("%w %q (want ngram, draft or off)", ErrMode, s)
}

// Defaults.
const (
	// DefaultMaxDraft caps the draft length: a verify pass of more tokens
	// costs visibly more than one on the CPU, and runs of accepted tokens
	// longer than this are rare outside verbatim quotes.
	DefaultMaxDraft = 12
	// NgramMax and NgramMin are the lookup's n-gram sizes, longest first,
	// as llama.cpp's prompt lookup tries 4 down to 1; a single token
	// matches too often to pay for a batched pass on the CPU, so the
	// shortest tried is two.
	NgramMax = 4
	NgramMin = 2
)

// Options configure speculation.
type Options struct {
	Mode Mode
	// DraftPath is the draft model's GGUF file (Mode Draft).
	DraftPath string
	// MaxDraft caps the tokens drafted per pass; 0: DefaultMaxDraft.
	MaxDraft int
	// Auto: Mode is the default's choice, not asked for. Auto prompt
	// lookup is off on the GPU backend, where it measured slower on every
	// model (on an H200: 8B chained decode 313–318 tok/s without it, 241
	// with; plain steps 223–235 against 184–187).
	Auto bool
}

// LookupOn says prompt lookup runs on the named backend: where it was
// asked for, and as the default's choice (Auto) anywhere but the GPU. The
// chat and the server both ask it.
func (o Options) LookupOn(backend string) bool {
	return o.Mode == NGram && !(o.Auto && backend == "gpu")
}

// Sentinel errors.
var (
	// ErrMode: an unknown speculation mode.
	ErrMode = errors.New("unknown speculation mode")
	// ErrVocabMismatch: the draft model's vocabulary is not the target's,
	// so its token ids would mean other tokens.
	ErrVocabMismatch = errors.New("the draft model's vocabulary differs from the target's")
	// ErrNoDraft: Mode Draft without a draft model.
	ErrNoDraft = errors.New("speculation mode draft needs a draft model (--draft)")
)

// Stats count what speculation did.
type Stats struct {
	Drafted  int // tokens proposed
	Accepted int // of them, accepted
	Passes   int // verify passes
}

// Rate is the share of drafted tokens accepted, 0 when none were drafted.
func (s Stats) Rate() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}
