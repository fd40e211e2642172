package slots

import "time"

// Chained steps: the fast path of a batch of one. While one generation is
// all the scheduler runs, its slot sits at the start of the cache and its
// request wants nothing of a step but the token (no constraint, penalty,
// bias, ban, log-probabilities or logits, no objection from its Chain
// hook, and a sampler whose draw the device can make: greedy, or top-k
// without penalties), its steps run chained where
// the model can chain them (infer.Model.ChainOn: the backend and network
// say so, whatever the architecture): each pass's token stays on the
// device as the next pass's, and the next pass is encoded while this one
// runs, so the host is off the critical path. Anything else (a second
// request, drafts to verify, the end of the slot) stops the chain first and
// the scheduler's rows pass takes over where plain decoding would be.
//
// While a chained pass is in flight the slot's tokens hold the token it
// runs, its next: one more than plain decoding holds. Stopping the chain
// gives that position back, which the next pass writes over (a recurrent
// state is taken back a token on the device there: infer.ChainedRecurrent).

// chainSlot is the slot whose next step may run chained, or nil.
func (s *Scheduler) chainSlot() *slot {
	var one *slot
	for _, sl := range s.slots {
		if sl.job == nil {
			continue
		}
		if one != nil {
			return nil
		}
		one = sl
	}
	if one == nil || !one.decoding || one.base != 0 || one.noChain || one.job.embed != nil {
		return nil
	}
	r := &one.job.req
	if r.Constraint != nil || r.Presence != 0 || r.Frequency != 0 || len(r.Ban) > 0 || len(r.Bias) > 0 ||
		r.Logprobs || r.TopLogprobs > 0 || r.TopLogits > 0 || r.Chain != nil && !r.Chain() {
		return nil
	}
	// A pass at the end of the slot's tokens, two when the chain starts
	// (it runs next and then its successor): both inside the slot.
	need := 2
	if one.chain != nil && one.chain.InFlight() {
		need = 1
	}
	if len(one.tokens)+need > s.slotCtx {
		return nil
	}
	return one
}

// chainStep runs sl's next step chained; false when the step has drafts
// to verify (sl.drafts, for the rows pass) or the model cannot chain it
// (the slot then steps plainly for the rest of its request).
func (s *Scheduler) chainStep(sl *slot) bool {
	if sl.chain == nil {
		sl.chain = s.m.ChainOn(&sl.tokens, sl.sampler)
		if sl.chain == nil {
			sl.noChain = true
			return false
		}
	}
	if r := &sl.job.req; r.MaxTokens > 0 && sl.generated == r.MaxTokens-1 && sl.chain.InFlight() && r.Params.Argmax() {
		return s.chainLast(sl)
	}
	if s.drafterFor(sl) != nil {
		drafts, err := s.draftFor(sl, s.m.MaxBatch()-1)
		if err != nil {
			s.end(sl, "error", err)
			return true
		}
		if len(drafts) > 0 {
			sl.drafts, sl.drafted = drafts, true
			return false // the rows pass verifies them
		}
	}
	s.stepping = true
	defer s.stepDone()
	t0 := time.Now()
	id, err := sl.chain.Next(sl.next)
	took := time.Since(t0).Seconds()
	if err != nil {
		sl.chain = nil // its failure emptied the slot's tokens
		s.end(sl, "error", err)
		return true
	}
	s.chained(sl, id, took)
	return true
}

// chainLast takes a greedy request's last token from the pass in flight
// and ends the chain, rather than have Next start the pass after it, which
// nothing would read: a request of n tokens then costs n passes, as plain
// decoding's. The cache holds the token that pass ran, as plain decoding's
// would.
func (s *Scheduler) chainLast(sl *slot) bool {
	c := sl.chain
	sl.chain = nil
	s.stepping = true
	defer s.stepDone()
	t0 := time.Now()
	id, _, err := c.Stop()
	took := time.Since(t0).Seconds()
	if err != nil {
		s.end(sl, "error", err) // Stop emptied the tokens: the device's cache is unknown
		return true
	}
	s.chained(sl, id, took)
	return true
}

// held is how many tokens sl's region holds as plain decoding counts
// them: not the one a chained pass in flight runs.
func (sl *slot) held() int {
	if sl.chain != nil && sl.chain.InFlight() {
		return len(sl.tokens) - 1
	}
	return len(sl.tokens)
}

// stopChain ends sl's chain, leaving its tokens as plain decoding leaves
// them.
func (s *Scheduler) stopChain(sl *slot) error {
	c := sl.chain
	if c == nil {
		return nil
	}
	sl.chain = nil
	_, inFlight, err := c.Stop()
	if err != nil {
		return err // Stop emptied the tokens: the device's cache is unknown
	}
	if inFlight {
		sl.tokens = sl.tokens[:len(sl.tokens)-1]
	}
	return nil
}

// stopChains ends every chain before a rows pass; a slot whose chain fails
// to stop ends with the error.
func (s *Scheduler) stopChains() {
	for _, sl := range s.slots {
		if sl.chain == nil {
			continue
		}
		if err := s.stopChain(sl); err != nil && sl.job != nil {
			s.end(sl, "error", err)
		}
	}
}

// chained emits id, a chained pass's token that took took seconds, and
// counts the pass.
func (s *Scheduler) chained(sl *slot, id int32, took float64) {
	s.emit(sl, Token{ID: id})
	s.mu.Lock()
	s.stats.Passes++
	s.stats.DecodeTokens++
	s.stats.Generated++
	s.stats.Chained++
	s.stats.DecodeSeconds += took
	s.mu.Unlock()
}
