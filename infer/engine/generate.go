package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

// generate answers one request: render, prefill what the cache lacks,
// then sample and stream until the end of the turn, the limit, the end of
// the context or Stop.
func (e *Engine) generate(r generateRequest) {
	stopped := func() bool { return e.stopped.Load() >= r.id }
	cur := &e.cur
	m, seq := cur.model, cur.seq
	start := time.Now()
	kv := m.KVSpec()
	recurrent := m.RecurrentSpec().Bytes()
	// The KV cache as the backend allocated it (ModelInfo's figure), so
	// that the total is the same whether a reply runs or not.
	stats := Stats{ContextSize: m.Context(), KVAllocBytes: cur.info.KVAllocBytes}
	measure := func() {
		stats.ContextUsed = seq.Len()
		kv.Context = seq.Len()
		stats.KVUsedBytes = kv.Bytes()
		held, most := m.SnapshotBytes()
		stats.StateBytes, stats.StateMaxBytes = recurrent+held, recurrent+most
	}
	measure()
	finish := func(reason string) {
		measure()
		if e.profilingOn {
			e.emit(e.profileSample(m))
		}
		e.emit(Done{Reason: reason, Stats: stats})
	}
	if stopped() {
		finish("stopped")
		return
	}
	sampler, err := sample.New(e.sampling(r.req.Sampling))
	if err != nil {
		e.emit(Error{Err: err})
		return
	}
	// A raw prompt is the caller's own, markers and all. In a conversation
	// only the template's markers are control tokens: a "<|im_end|>" typed
	// in a message (or stored in a reply) is text. A conversation that
	// outgrows the context leaves out its oldest turns (window.fit).
	withBOS := func(ids []int32) []int32 {
		if cur.tok.AddBOS() && cur.tok.BOS() >= 0 {
			ids = append([]int32{cur.tok.BOS()}, ids...)
		}
		return ids
	}
	prompt, msgs := r.req.Raw, r.req.Messages
	var ids []int32
	if prompt != "" {
		ids = withBOS(cur.tok.Encode(prompt, true))
	} else {
		var dropped int
		ids, dropped, err = e.window.fit(r.req.Messages, m.Context(), replyReserve(m.Context(), r.req.MaxTokens),
			func(kept []chat.Message) []int32 { // fit encodes its final choice last
				msgs = kept
				return withBOS(cur.tmpl.Encode(kept, true, r.req.Think, cur.tok.Encode))
			})
		if err != nil {
			e.emit(Error{Err: err})
			finish("length")
			return
		}
		if dropped > 0 {
			e.emit(ContextTrimmed{Dropped: dropped, Tokens: len(ids), Context: m.Context()})
		}
		prompt = cur.tmpl.Render(msgs, true, r.req.Think)
	}
	if len(ids) == 0 {
		e.emit(Error{Err: fmt.Errorf("%w: the prompt encodes to no tokens", infer.ErrBadShape)})
		finish("length")
		return
	}
	if len(ids) >= m.Context() {
		e.emit(Error{Err: fmt.Errorf("%w: the conversation has %d tokens, the context %d", infer.ErrContextFull, len(ids), m.Context())})
		finish("length")
		return
	}
	if r.req.Raw == "" {
		e.resume(r.req.Session, ids)
	}
	for _, id := range ids {
		sampler.Accept(id)
	}
	e.applyProfiling()
	if e.profilingOn {
		e.profileSample(m) // start the next sample at this request
	}
	var marks []int
	if m.Recurrent() && r.req.Raw == "" {
		marks = e.turnMarks(msgs, r.req.Think, ids)
	}
	if plan := seq.Plan(ids); plan.Kept == 0 && plan.Shared > 0 {
		e.emit(Notice{Text: fmt.Sprintf("re-reading the conversation from the start (%d tokens): "+
			"this model's recurrent state cannot go back to where it changed", len(ids))})
	}
	reuse, err := e.prefill(seq, ids, marks, stopped)
	if errors.Is(err, infer.ErrInterrupted) {
		finish("stopped")
		return
	}
	if err != nil {
		e.emit(Error{Err: err})
		seq.Reset()
		return
	}
	stats.PrefillTokens = len(ids) - reuse.Kept
	stats.PrefillTPS = rate(stats.PrefillTokens, time.Since(start))
	if e.profilingOn {
		// The prompt's passes apart from the decoding steps: their time
		// per token differs many times over.
		if ps := e.profileSample(m); ps.Sample.Tokens > 0 {
			ps.Prompt = true
			e.emit(ps)
		}
	}

	dec := cur.tok.NewStreamDecoder()
	// Reasoning is parsed out only where the template has it.
	var think *chat.ThinkParser
	if cur.tmpl.Thinks() {
		think = chat.NewThinkParser(strings.HasSuffix(strings.TrimRight(prompt, "\n"), chat.ThinkOpen))
	}
	decodeStart := time.Now()
	var top []sample.Logit
	// out streams one sampled token's text: its Step if asked for, then
	// its segments as Tokens.
	out := func(id int32, text string, end bool) bool {
		if r.req.Steps && !e.emit(Step{ID: id, Text: text, Top: slices.Clone(top)}) {
			return false
		}
		segs := []chat.Segment{{Text: text}}
		if think != nil {
			segs = think.Feed(text)
			if end {
				segs = append(segs, think.Flush()...)
			}
		}
		for _, s := range segs {
			if s.Text != "" && !e.emit(Token{ID: id, Text: s.Text, Thinking: s.Thinking}) {
				return false
			}
		}
		return true
	}
	// The decoder samples as plain decoding does, running the tokens a
	// drafter guesses through the model several at a time (infer/spec);
	// without a drafter it is plain decoding.
	sd := spec.NewDecoder(seq, sampler, e.drafter(sampler.Params()), e.opts.Spec.MaxDraft)
	end := func(reason string) {
		// The cache then holds what plain decoding leaves: every token
		// before the last one returned.
		if err := sd.Finish(); err != nil {
			e.emit(Error{Err: err})
			seq.Reset()
		}
		st := sd.Stats()
		stats.Drafted, stats.Accepted, stats.Verifies = st.Drafted, st.Accepted, st.Passes
		finish(reason)
	}
	// Greedy and top-k sampled steps without penalties run chained on a
	// GPU that can chain them (infer.Chain: the host's encoding off the
	// critical path), unless
	// the logits are wanted or the pass is being profiled.
	chainable := r.req.TopLogits == 0
	for {
		want := e.profiling.Load()
		if err := sd.UseChain(chainable && !want && !e.profilingOn); err != nil {
			e.emit(Error{Err: err})
			end("length")
			return
		}
		e.applyProfilingTo(want)
		if stopped() {
			out(-1, dec.Flush(), true)
			end("stopped")
			return
		}
		limit := 0
		if r.req.MaxTokens > 0 {
			limit = r.req.MaxTokens - stats.DecodeTokens
		}
		id, err := sd.Next(limit)
		if err != nil {
			e.emit(Error{Err: err})
			end("length")
			return
		}
		e.samplingTime += sd.TakeSamplingTime()
		if r.req.TopLogits > 0 {
			top = sample.Top(sd.Logits(), r.req.TopLogits, top)
		}
		if stats.DecodeTokens == 0 {
			stats.TTFT = time.Since(start)
		}
		stats.DecodeTokens++
		if cur.tok.IsEOG(id) || cur.stopIDs[id] {
			out(id, dec.Flush(), true)
			end("stop")
			return
		}
		full := sd.Len() >= m.Context()
		last := full || (r.req.MaxTokens > 0 && stats.DecodeTokens >= r.req.MaxTokens)
		text := dec.Next(id)
		if last {
			text += dec.Flush()
		}
		if !out(id, text, last) {
			sd.Finish()
			return
		}
		if last {
			end("length")
			return
		}
		stats.DecodeTPS = rate(stats.DecodeTokens, time.Since(decodeStart))
		st := sd.Stats()
		stats.Drafted, stats.Accepted, stats.Verifies = st.Drafted, st.Accepted, st.Passes
		measure()
		e.emit(stats)
		if e.profilingOn && stats.DecodeTokens%e.opts.ProfileEvery == 0 {
			e.emit(e.profileSample(m))
		}
	}
}

// Prefill chunks: a long prompt is read in chunks sized to take about
// prefillTarget each (their speed measured as they run), so that the
// progress a front end shows moves at least every half second: a whole
// batch of 512 tokens took about 10 s on a 2-core machine with the 1.7B.
// The first chunk is small, as nothing is measured yet; the smallest keeps
// a slow machine's batches from shrinking to single tokens.
const (
	prefillTarget     = 250 * time.Millisecond
	prefillFirstChunk = 16
	prefillMinChunk   = 8
	// prefillReportFrom is the smallest prompt whose reading is reported.
	prefillReportFrom = 64
)

// prefill makes seq hold ids, reading what the cache lacks in chunks
// (prefillTarget) and reporting PrefillProgress from the start when the
// part to read is long. Each chunk is a prefill of a longer prefix of ids,
// which reuses the chunks before it.
func (e *Engine) prefill(seq *infer.Sequence, ids []int32, marks []int, stopped func() bool) (infer.Reuse, error) {
	plan := seq.Plan(ids)
	total := len(ids) - plan.Kept
	report := func(done int) {
		if total >= prefillReportFrom {
			e.emit(PrefillProgress{Done: done, Total: total})
		}
	}
	report(0)
	keepGoing := func(int, int) bool {
		e.applyProfiling()
		return !stopped()
	}
	maxChunk := max(seq.Model().MaxBatch(), 1)
	chunk := min(prefillFirstChunk, maxChunk)
	reuse := plan
	for end := plan.Kept; end < len(ids); {
		from := end
		end = min(end+chunk, len(ids))
		start := time.Now()
		r, err := seq.PrefillMarked(ids[:end], marks, keepGoing)
		if from == plan.Kept {
			reuse.Kept = r.Kept
		}
		if err != nil {
			return reuse, err
		}
		report(end - plan.Kept)
		if end < len(ids) && stopped() {
			return reuse, fmt.Errorf("%w after %d of %d prompt tokens", infer.ErrInterrupted, end, len(ids))
		}
		chunk = nextChunk(end-max(from, r.Kept), time.Since(start), maxChunk)
	}
	return reuse, nil
}

// nextChunk is how many tokens the next prefill chunk takes, given that
// the last one ran n tokens in d: about prefillTarget's worth, between
// prefillMinChunk and the model's largest batch.
func nextChunk(n int, d time.Duration, maxChunk int) int {
	if n <= 0 || d <= 0 {
		return maxChunk
	}
	want := int(float64(n) * float64(prefillTarget) / float64(d))
	return max(min(want, maxChunk), min(prefillMinChunk, maxChunk))
}

// turnMarks are the positions in ids (the tokens of msgs encoded for
// generation) where the last few messages end: the turn boundaries that
// regenerating the reply, editing the last message or the one before it go
// back to, where a recurrent model snapshots its state. Each prefix is
// encoded with an empty user turn after it, so that an assistant turn
// encodes as it does inside the whole conversation (without its reasoning)
// and not as the last message would; a boundary whose tokens are not a
// prefix of ids is left out.
func (e *Engine) turnMarks(msgs []chat.Message, think bool, ids []int32) []int {
	cur := &e.cur
	encode := func(ms []chat.Message) []int32 { return cur.tmpl.Encode(ms, false, think, cur.tok.Encode) }
	bos := 0
	if cur.tok.AddBOS() && cur.tok.BOS() >= 0 {
		bos = 1
	}
	next := chat.Message{Role: chat.RoleUser}
	base, nextTurn := encode(nil), encode([]chat.Message{next})
	if len(nextTurn) < len(base) || !slices.Equal(nextTurn[:len(base)], base) {
		return nil
	}
	nextTurn = nextTurn[len(base):]
	var marks []int
	for k := max(len(msgs)-3, 0); k <= len(msgs); k++ {
		full := encode(append(msgs[:k:k], next))
		if len(full) <= len(nextTurn) || !slices.Equal(full[len(full)-len(nextTurn):], nextTurn) {
			continue
		}
		head := full[:len(full)-len(nextTurn)]
		n := bos + len(head)
		if n >= len(ids) || !slices.Equal(head, ids[bos:n]) {
			continue
		}
		marks = append(marks, n)
	}
	return marks
}

// profileSample takes the backend's phase times, adds the sampler's and
// starts over.
func (e *Engine) profileSample(m *infer.Model) ProfileSample {
	s := m.Backend().TakeProfile()
	s.Add(profile.Sampling, e.samplingTime)
	e.samplingTime = 0
	return ProfileSample{Sample: s}
}

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
