package tui

import (
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
)

// storedStats are the numbers of a reply's final engine Stats that the
// session store keeps.
func storedStats(s engine.Stats) session.Stats {
	return session.Stats{
		PromptTokens: s.PrefillTokens,
		GenTokens:    s.DecodeTokens,
		PrefillTPS:   s.PrefillTPS,
		DecodeTPS:    s.DecodeTPS,
		TTFT:         s.TTFT,
	}
}
