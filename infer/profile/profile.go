// Package profile names the phases of one forward pass and accumulates their
// timings. The CPU backend fills it from wall-clock timers, the GPU backend from
// timestamp queries; the TUI's profiling panel shows either the same way.
package profile

import "time"

// Phase is one step of a transformer forward pass.
type Phase int

const (
	Embed Phase = iota
	QKV
	Attention
	AttnOutput
	FFN
	OutputHead
	Sampling
	NumPhases
)

var phaseNames = [NumPhases]string{"embedding", "qkv proj", "attention", "attn output", "ffn", "output head", "sampling"}

func (p Phase) String() string {
	if p < 0 || p >= NumPhases {
		return "unknown"
	}
	return phaseNames[p]
}

// Sample is the time spent in each phase over Tokens forward passes.
type Sample struct {
	Phases [NumPhases]time.Duration
	Tokens int
	Source string // "cpu timers" or "gpu timestamps"
}

// Add accumulates d into phase p.
func (s *Sample) Add(p Phase, d time.Duration) { s.Phases[p] += d }

// Total is the sum over all phases.
func (s *Sample) Total() time.Duration {
	var t time.Duration
	for _, d := range s.Phases {
		t += d
	}
	return t
}

// PerToken is the mean time of phase p per forward pass.
func (s *Sample) PerToken(p Phase) time.Duration {
	if s.Tokens == 0 {
		return 0
	}
	return s.Phases[p] / time.Duration(s.Tokens)
}
