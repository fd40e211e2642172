package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

// generate answers one request: render, then hand the prompt to the
// model's scheduler (infer/slots: the one decode loop, whose one slot is
// the conversation's cache), which reads what the cache lacks and samples
// until the end of the turn, the limit, the end of the context or Stop,
// while this streams its tokens as text.
func (e *Engine) generate(r generateRequest) {
	stopped := func() bool { return e.stopped.Load() >= r.id }
	cur := &e.cur
	m := cur.model
	start := time.Now()
	kv := m.KVSpec()
	recurrent := m.RecurrentSpec().Bytes()
	// The KV cache as the backend allocated it (ModelInfo's figure), so
	// that the total is the same whether a reply runs or not.
	stats := Stats{ContextSize: m.Context(), KVAllocBytes: cur.info.KVAllocBytes}
	// The snapshots are read where nothing runs on the model: here, once
	// the prompt is read (on the scheduler's goroutine) and at the end.
	snapHeld, snapMost := m.SnapshotBytes()
	measure := func(used int) {
		stats.ContextUsed = used
		kv.Context = used
		stats.KVUsedBytes = kv.Bytes()
		stats.StateBytes, stats.StateMaxBytes = recurrent+snapHeld, recurrent+snapMost
	}
	used := e.cached()
	measure(used)
	finish := func(reason string) {
		snapHeld, snapMost = m.SnapshotBytes()
		measure(used)
		e.applyProfiling() // asked for during the reply: its Done brings a sample
		if e.profilingOn {
			e.emit(e.profileSample(m))
		}
		e.emit(Done{Reason: reason, Stats: stats})
	}
	if stopped() {
		finish("stopped")
		return
	}
	params := e.sampling(r.req.Sampling)
	if err := params.Validate(); err != nil {
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
		var err error
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
		used = e.cached()
	}
	e.applyProfiling()
	if e.profilingOn {
		e.profileSample(m) // start the next sample at this request
	}
	var marks []int
	if m.Recurrent() && r.req.Raw == "" {
		marks = e.turnMarks(msgs, r.req.Think, ids)
	}

	// The hooks run on the scheduler's goroutine, between its passes,
	// while this one waits for tokens: what they write is read here only
	// after the tokens (or the end) they precede.
	var read struct {
		kept int
		end  time.Time // the prompt was read
	}
	prefill := func(p slots.Prefill) {
		if p.Done == 0 {
			read.kept = p.Kept
			if p.Kept == 0 && p.Shared > 0 {
				e.emit(Notice{Text: fmt.Sprintf("re-reading the conversation from the start (%d tokens): "+
					"this model's recurrent state cannot go back to where it changed", len(ids))})
			}
		}
		if p.Total >= prefillReportFrom {
			e.emit(PrefillProgress{Done: p.Done, Total: p.Total})
		}
		if p.Done < p.Total {
			e.applyProfiling()
			return
		}
		read.end = time.Now()
		snapHeld, snapMost = m.SnapshotBytes()
		if e.profilingOn {
			// The prompt's passes apart from the decoding steps: their
			// time per token differs many times over.
			if ps := e.profileSample(m); ps.Sample.Tokens > 0 {
				ps.Prompt = true
				e.emit(ps)
			}
		}
	}
	passes := 0
	step := func(*infer.Model) {
		e.applyProfiling()
		if passes++; e.profilingOn && passes%e.opts.ProfileEvery == 0 {
			e.emit(e.profileSample(m))
		}
	}
	// Greedy and top-k sampled steps without penalties run chained on a
	// GPU that can chain them (infer.Chain: the host's encoding off the
	// critical path), unless the logits are wanted (the scheduler sees
	// TopLogits) or the passes are being profiled.
	chain := func() bool { return !e.profiling.Load() && !e.profilingOn }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.setCancel(cancel)
	defer e.setCancel(nil)
	if stopped() { // a Stop between the first look and setCancel
		cancel()
	}
	st, err := cur.sched.Submit(ctx, slots.Request{
		Prompt: ids, Params: params, MaxTokens: r.req.MaxTokens,
		End:     func(id int32) bool { return cur.tok.IsEOG(id) || cur.stopIDs[id] },
		Prefill: prefill, Chunk: prefillTarget, Marks: marks,
		TopLogits: r.req.TopLogits, Chain: chain, Step: step,
		Lockstep: true, Drafter: e.drafter(params),
	})
	if err != nil {
		e.emit(Error{Err: err})
		finish("length")
		return
	}

	dec := cur.tok.NewStreamDecoder()
	// Reasoning is parsed out only where the template has it.
	var think *chat.ThinkParser
	if cur.tmpl.Thinks() {
		tags := cur.tmpl.ThinkTags()
		think = chat.NewThinkParserTags(tags, strings.HasSuffix(strings.TrimRight(prompt, "\n"), tags.Open))
	}
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
	// closing: the engine is closing (an event could not be sent); the
	// scheduler is let go of the request.
	closing := func() {
		cancel()
		for _, done := st.Next(); !done; _, done = st.Next() {
		}
	}
	n := 0
	for {
		toks, done := st.Next()
		for _, t := range toks {
			n++
			e.samplingTime.Add(int64(t.Sampling))
			if n == 1 {
				stats.TTFT = time.Since(start)
				stats.PrefillTokens = len(ids) - read.kept
				stats.PrefillTPS = rate(stats.PrefillTokens, read.end.Sub(start))
			}
			stats.DecodeTokens = n
			stats.Drafted, stats.Accepted, stats.Verifies = t.Drafted, t.Accepted, t.Verifies
			top = t.Logits
			if cur.tok.IsEOG(t.ID) || cur.stopIDs[t.ID] { // the scheduler ends here
				if !out(t.ID, dec.Flush(), true) {
					closing()
					return
				}
				continue
			}
			// The scheduler's own limits: the reply's length, and a cache
			// that holds every token but this one.
			last := r.req.MaxTokens > 0 && n >= r.req.MaxTokens || len(ids)+n-1 >= m.Context()
			text := dec.Next(t.ID)
			if last {
				text += dec.Flush()
			}
			if !out(t.ID, text, last) {
				closing()
				return
			}
			if last {
				continue
			}
			stats.DecodeTPS = rate(n, time.Since(read.end))
			measure(len(ids) + n - 1)
			e.emit(stats)
		}
		if done {
			break
		}
	}
	res := st.Result()
	stats.Drafted, stats.Accepted, stats.Verifies = res.Drafted, res.Accepted, res.Verifies
	if res.Slot >= 0 { // else it was stopped before it started: the cache is as it was
		used = res.Held
	}
	switch res.Reason {
	case "stop", "length":
		finish(res.Reason)
	case "cancelled":
		if n > 0 {
			out(-1, dec.Flush(), true)
		}
		finish("stopped")
	default:
		e.emit(Error{Err: res.Err})
		if n > 0 {
			finish("length")
		}
	}
}

// setCancel makes Stop cancel the reply in progress (nil: none).
func (e *Engine) setCancel(c context.CancelFunc) {
	e.mu.Lock()
	e.cancel = c
	e.mu.Unlock()
}

// Prefill: a long prompt is read in chunks sized to take about
// prefillTarget each (slots.Request.Chunk), so that the progress a front
// end shows moves at least every half second (a whole batch of 512 tokens
// took about 10 s on a 2-core machine with the 1.7B) and Stop is prompt.
const (
	prefillTarget = 250 * time.Millisecond
	// prefillReportFrom is the smallest prompt whose reading is reported.
	prefillReportFrom = 64
)

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
	s.Add(profile.Sampling, time.Duration(e.samplingTime.Swap(0)))
	return ProfileSample{Sample: s}
}

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
