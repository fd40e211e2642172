package spec

import "slices"

// Ngram is prompt lookup: it proposes what followed the latest earlier
// occurrence of the context's last n tokens, for n from Max down to Min
// (the longest match first). A reply that quotes, repeats or edits a
// passage of the conversation is drafted from that passage.
type Ngram struct {
	Min, Max int
}

// NewNgram is prompt lookup with the default n-gram sizes.
func NewNgram() *Ngram { return &Ngram{Min: NgramMin, Max: NgramMax} }

// Draft proposes up to k tokens to follow ctx; none when no n-gram of the
// context's end occurred before.
func (g *Ngram) Draft(ctx []int32, k int) []int32 {
	if k <= 0 {
		return nil
	}
	for n := min(g.Max, len(ctx)-1); n >= max(g.Min, 1); n-- {
		tail := ctx[len(ctx)-n:]
		for i := len(ctx) - n - 1; i >= 0; i-- {
			if ctx[i+n-1] == tail[n-1] && slices.Equal(ctx[i:i+n], tail) {
				return ctx[i+n : min(i+n+k, len(ctx))]
			}
		}
	}
	return nil
}
