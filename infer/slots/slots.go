// Package slots serves many generations on one model at once: continuous
// batching. The model's KV cache is cut into slots, one region per
// sequence; every step runs one pass whose rows are the next token of each
// decoding slot and a chunk of the prompt of a slot still prefilling
// (infer.Model.ForwardRows). On a CPU a pass is bound by reading the
// weights, so N sequences cost little more than one.
//
// A slot keeps the tokens its region holds after its request ends, so a
// request whose prompt extends an earlier one (a conversation's next turn)
// goes to that slot and prefills only what is new.
//
// With a drafter (Options.Drafter: prompt lookup), a decoding slot's row
// may bring the tokens it drafts as rows of the same pass (spec.go):
// the sampled tokens are what plain decoding gives, more of them per pass
// when the drafts were right.
//
// One goroutine owns the model. Submit never blocks on inference: tokens
// pile up in the request's Stream until its reader takes them, so a slow
// client slows nobody else.
//
// A chat is the one-sequence client (Options.Forward): one slot run
// through Model.Forward, whose prompt is read in time-sized chunks that
// report their progress and stop on cancel (Request.Prefill, Chunk),
// whose recurrent state is snapshotted at turn boundaries (Request.Marks)
// and whose cache is saved, restored and reset between requests (State);
// hooks on the scheduler's goroutine let it profile the passes
// (Request.Chain, Step).
package slots

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("slots: scheduler closed")

// ErrPromptTooLong wraps infer.ErrContextFull for a prompt that leaves no
// room in a slot.
var ErrPromptTooLong = fmt.Errorf("%w: the prompt fills the slot's context", infer.ErrContextFull)

// Options configure a Scheduler.
type Options struct {
	// Model was loaded with a context of Slots × Context positions.
	Model *infer.Model
	// Slots is how many sequences decode together; it becomes 1 when the
	// model's backend cannot run passes over several sequences
	// (Model.RowsSupported), and the scheduler then runs one at a time.
	Slots int
	// Context is each slot's size in tokens.
	Context int
	// Drafter, if set, drafts tokens to verify beside each decoding slot's
	// next (speculative decoding, spec.go), such as prompt lookup
	// (spec.LookupDrafter) or a draft model (spec.ModelDrafter); nil
	// decodes one token per slot and pass. Whether drafts pay is judged by
	// the rows they add to a pass and the time the drafter took to propose
	// them: prompt lookup's is next to nothing, a draft model's is not.
	Drafter spec.Drafter
	// MaxDraft caps the tokens drafted per slot and pass; 0:
	// spec.DefaultMaxDraft.
	MaxDraft int
	// Forward runs one slot (Slots is then 1) through Model.Forward, as a
	// chat does, instead of passes over rows: the model's own recurrent
	// state is then the slot's, so a request's Marks snapshot it and State
	// can save and restore it. One sequence needs no rows.
	Forward bool
}

// ErrNoState: State was asked of a scheduler whose slots run in passes over
// rows, where the model's state is no one slot's (Options.Forward).
var ErrNoState = errors.New("slots: the model's state is one slot's only where passes run through Forward")

// Constraint restricts the tokens a request may sample (constrained
// decoding, infer/grammar). Allowed and Mask must agree.
type Constraint interface {
	// Allowed says id may come next.
	Allowed(id int32) bool
	// Mask sets the logits of the tokens that may not come next to −∞.
	Mask(logits []float32)
	// Accept advances past id, which was Allowed.
	Accept(id int32) error
}

// Request is one generation.
type Request struct {
	Prompt []int32
	Params sample.Params
	// Presence and Frequency are OpenAI's penalties, over the tokens
	// generated so far: a logit drops by Presence once a token appeared
	// and by Frequency for each time it did.
	Presence, Frequency float32
	// MaxTokens caps the generated tokens; 0: until the slot is full.
	MaxTokens int
	// End says id ends the generation (end of turn); it is reported, with
	// Reason "stop", and not run through the model.
	End func(id int32) bool
	// Constraint, if set, masks what may be sampled.
	Constraint Constraint
	// Ban are tokens never sampled (llama-server's ignore_eos bans the
	// end-of-turn tokens: a benchmark's replies then run to MaxTokens).
	Ban []int32
	// Bias is added to the logits of its tokens before sampling (OpenAI's
	// logit_bias; −∞ bans).
	Bias map[int32]float32
	// TopLogprobs > 0 reports that many alternatives with each token;
	// Logprobs reports the sampled token's log-probability.
	Logprobs    bool
	TopLogprobs int
	// Own is how many of Prompt's first tokens are this client's own
	// conversation (a chat's messages, without the generation prompt);
	// 0: all of Prompt. A later request is told of its cache hit
	// (Result.Resumed) only when its prompt repeats all of them.
	Own int

	// Prefill, if set, is told how the prompt's reading goes: once when
	// the request gets its slot (Done 0) and after each pass that read a
	// chunk of it. It runs on the scheduler's goroutine, between passes,
	// where a one-sequence client may use the model (its backend's
	// profiling); it must not wait on the stream's reader.
	Prefill func(Prefill)
	// Chunk, when positive, sizes the prompt's chunks to take about that
	// long each (their speed measured as they run), so that a front end's
	// progress moves and cancelling the request stops the reading within
	// about that time; 0: as much of the prompt as a pass takes.
	Chunk time.Duration
	// Marks are positions in Prompt (a chat's turn boundaries) where a
	// recurrent model's state is snapshotted as the reading passes them,
	// so that a later prompt that shares the tokens up to one (a
	// regenerated or edited turn) resumes there (infer.Model.Checkpoint);
	// chunks are split at them. Only where the passes run through Forward
	// (Options.Forward); elsewhere they change nothing.
	Marks []int
	// TopLogits > 0 reports that many of the most likely tokens with each
	// token, with their raw logits (Token.Logits): the model's, before
	// penalties, bias and bans.
	TopLogits int
	// Chain, if set, is asked before each decoding step whether the step
	// may run chained (chain.go); false stops a chain in flight first.
	// Step, if set, is called before each decoding step that runs
	// plainly, with no chained pass in flight. Both run on the scheduler's
	// goroutine: a one-sequence client turns its backend's profiling on
	// or off and takes its profile there, chaining off while it profiles.
	Chain func() bool
	Step  func(m *infer.Model)
	// Lockstep holds the request's next step until its reader has taken
	// the tokens sampled so far (Stream.Next): a chat that stops between
	// tokens then leaves the slot's cache holding only tokens its reader
	// saw (a recurrent state cannot go back to where the reader stopped),
	// at the cost of the next step waiting on the reader.
	Lockstep bool
	// Drafter, if set, drafts this request's tokens instead of
	// Options.Drafter (a chat's draft model, set to the request's
	// sampling: spec.ModelDrafter.SetSampling); it is called on the
	// scheduler's goroutine, and not at all where the model cannot verify
	// drafts.
	Drafter spec.Drafter
}

// Prefill is how the reading of a request's prompt goes.
type Prefill struct {
	// Shared is how many of the prompt's first tokens the slot's cache
	// held; Kept how many of them were not read again: Shared, or on a
	// recurrent model the latest position ≤ Shared its state could resume
	// from, 0 when there was none (Shared > 0 == Kept: the conversation is
	// read again from the start).
	Shared, Kept int
	// Done of Total tokens (the prompt less Kept) are read.
	Done, Total int
}

// Token is one sampled token.
type Token struct {
	ID      int32
	Logprob float32        // log-probability under the model (set with Request.Logprobs)
	Top     []sample.Logit // the most likely tokens with their log-probabilities, most likely first
	// Logits are the most likely tokens with their raw logits, most likely
	// first (Request.TopLogits).
	Logits []sample.Logit
	// Sampling is the time the host took to sample it (0 when the device
	// drew it: a chained step).
	Sampling time.Duration
	// Drafted, Accepted and Verifies are the request's speculation counts
	// (Result's) when the token was sampled, for a front end that shows
	// them live.
	Drafted, Accepted, Verifies int
}

// Result ends a Stream.
type Result struct {
	// Reason: "stop" (an End token), "length" (MaxTokens or a full slot),
	// "cancelled" (the context ended), "error".
	Reason       string
	Err          error
	PromptTokens int
	CachedTokens int // prompt tokens the slot's cache already held
	// Resumed is CachedTokens where the prompt repeats all of the earlier
	// request's Own tokens (the same conversation's next turn), else 0.
	// It is what a client may be told: CachedTokens would tell it how
	// much of its prompt matched another client's, so a secret could be
	// guessed a token at a time.
	Resumed          int
	CompletionTokens int
	// Held is how many tokens the slot's cache holds at the end: the
	// prompt's that were read and every generated token but the last,
	// which was not run.
	Held   int
	Queued time.Duration // waiting for a slot
	TTFT   time.Duration // from Submit to the first token
	Decode time.Duration // from the first token to the last
	Slot   int
	// Drafted and Accepted count the speculative drafts verified for this
	// generation and those that the sampled tokens confirmed; Verifies
	// the passes that verified them.
	Drafted, Accepted, Verifies int
	// Sampling is the host's time sampling the generation's tokens.
	Sampling time.Duration
}

// Stream is a submitted request's output: read tokens with Next until it
// reports the end, then Result.
type Stream struct {
	wake   func() // Request.Lockstep: the scheduler waits on the reader
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	toks   []Token
	done   bool
	res    Result
	notify chan struct{}
}

func (st *Stream) push(t Token) {
	st.mu.Lock()
	st.toks = append(st.toks, t)
	st.mu.Unlock()
	st.poke()
}

func (st *Stream) finish(r Result) {
	st.mu.Lock()
	st.done, st.res = true, r
	st.mu.Unlock()
	st.cancel()
	st.poke()
}

func (st *Stream) poke() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// Next waits for tokens and returns those sampled since the last call;
// done is true once the generation ended (the tokens returned with it are
// the last).
func (st *Stream) Next() (toks []Token, done bool) {
	for {
		st.mu.Lock()
		toks, done = st.toks, st.done
		st.toks = nil
		st.mu.Unlock()
		if len(toks) > 0 || done {
			if st.wake != nil && len(toks) > 0 {
				st.wake()
			}
			return toks, done
		}
		<-st.notify
	}
}

// Collect reads the stream to its end: the tokens' ids and the Result.
func (st *Stream) Collect() ([]int32, Result) {
	var ids []int32
	for {
		toks, done := st.Next()
		for _, t := range toks {
			ids = append(ids, t.ID)
		}
		if done {
			return ids, st.Result()
		}
	}
}

// Cancel stops the generation (a stop string matched, the client left);
// the slot is freed before the next step.
func (st *Stream) Cancel() { st.cancel() }

// Result is how the generation ended; valid once Next reported done.
func (st *Stream) Result() Result {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.res
}

// Stats are the scheduler's counters since it started.
type Stats struct {
	Slots, Busy, Queued int
	Requests            int64 // finished
	PromptTokens        int64 // run through the model (cached ones not counted)
	CachedTokens        int64
	Generated           int64   // tokens sampled
	DecodeTokens        int64   // sampled tokens run through the model (decode rows)
	PromptSeconds       float64 // pass time spent on prompt rows
	DecodeSeconds       float64 // pass time spent on decode rows (drafts included)
	Passes              int64
	Drafted, Accepted   int64 // speculative drafts verified, and confirmed
	Chained             int64 // decode steps that ran chained (chain.go)
}

// Scheduler runs requests on a model's slots. Its methods are safe for
// concurrent use.
type Scheduler struct {
	m        *infer.Model
	slotCtx  int
	batched  bool
	vocab    int
	drafter  spec.Drafter
	canDraft bool // drafts can be verified on this model and backend
	maxDraft int
	cost     spec.PassCost

	mu      sync.Mutex
	queue   []*job
	closed  bool
	stats   Stats
	wake    chan struct{}
	stopped chan struct{}

	slots  []*slot
	logits []float32
	rows   []infer.Row
	toks   []int32 // the rows' tokens, for a pass through Forward
	outs   []int
	owners []*slot // the slot each output row belongs to
	work   []float32
	hidden []float32 // an Embed pass's hidden rows
	rej    spec.Rejection
	// stepping holds back the ends of the generations a step finishes
	// (ended) until the step's counters are in the stats: a client that
	// reads /metrics as soon as its reply ends finds its tokens counted.
	stepping bool
	ended    []ending
}

type ending struct {
	st  *Stream
	res Result
}

// finishStream ends a stream now, or at the end of the step under way.
func (s *Scheduler) finishStream(st *Stream, r Result) {
	if s.stepping {
		s.ended = append(s.ended, ending{st, r})
		return
	}
	st.finish(r)
}

// stepDone ends the streams the step finished.
func (s *Scheduler) stepDone() {
	s.stepping = false
	for _, e := range s.ended {
		e.st.finish(e.res)
	}
	clear(s.ended)
	s.ended = s.ended[:0]
}

type job struct {
	req       Request
	st        *Stream
	submitted time.Time

	drafted, accepted, verifies int
	embed                       *embedding // an Embed job, not a generation
	// state is a State call's work, done its result.
	state func(*infer.Sequence) error
	done  chan error
}

// slot is a region of the KV cache and the request using it.
type slot struct {
	index  int
	base   int
	tokens []int32 // what the region holds, position by position
	job    *job

	sampler   *sample.Sampler
	prompt    []int32 // the request's prompt; tokens[:done] hold its start
	done      int
	next      int32 // the sampled token to run next (decoding)
	decoding  bool
	counts    map[int32]int
	generated int
	cached    int
	resumed   int
	own       int // the Own tokens of the request whose tokens the region holds
	started   time.Time
	first     time.Time
	sampling  time.Duration

	// shared is the prompt's tokens the cache held (Prefill.Shared);
	// chunk the prompt tokens the next pass reads (Request.Chunk); marks
	// the positions to snapshot the state at (Request.Marks).
	shared int
	chunk  int
	marks  []int

	// out is the index in the pass's outputs of the slot's first row;
	// drafts the tokens drafted after next for this pass.
	out       int
	drafts    []int32
	draft     spec.Control
	lookupCtx []int32
	// dists are the drafts' distributions, for rejection sampling (nil:
	// point masses); draftTime what drafting them took; q and x the
	// distribution and draft that the token being sampled decides; the
	// buffers are the slot's copies of the drafter's slices (spec.go).
	dists     [][]sample.Prob
	draftTime time.Duration
	q         []sample.Prob
	x         int32
	draftBuf  []int32
	distBuf   [][]sample.Prob
	// verify is the sequence a recurrent model's drafts are verified on
	// (spec.go), verified set while its pass's rows are sampled.
	verify   *infer.Sequence
	verified bool

	// chain runs the slot's steps chained (chain.go); noChain: the model
	// cannot chain this request's steps; drafted: drafts holds this
	// pass's drafts already.
	chain   *infer.Chain
	noChain bool
	drafted bool
}

// New starts a scheduler on opts.Model. The caller keeps the model and
// closes it after Close.
func New(opts Options) (*Scheduler, error) {
	m := opts.Model
	if m == nil || opts.Context < 2 || opts.Slots < 1 {
		return nil, fmt.Errorf("%w: slots: %d slots of %d tokens", infer.ErrBadShape, opts.Slots, opts.Context)
	}
	n := opts.Slots
	// One slot gains nothing from passes over rows, and the model's own
	// passes keep what rows do not have: a recurrent model's chained steps
	// (its state is the model's, not a row slot's) and drafts verified in
	// one pass.
	batched := m.RowsSupported() && !opts.Forward && n > 1
	if batched {
		// a recurrent network keeps a state per slot (Row.Seq = index)
		if err := m.UseSequences(n); err != nil {
			return nil, err
		}
		if err := m.WarmRows(n, opts.Context); err != nil {
			return nil, err
		}
	} else {
		n = 1
	}
	if n*opts.Context > m.Context() {
		return nil, fmt.Errorf("%w: %d slots of %d tokens need a context of %d, the model has %d",
			infer.ErrBadShape, n, opts.Context, n*opts.Context, m.Context())
	}
	s := &Scheduler{
		m: m, slotCtx: opts.Context, batched: batched, vocab: m.Hparams.Vocab,
		maxDraft: cmp.Or(opts.MaxDraft, spec.DefaultMaxDraft),
		wake:     make(chan struct{}, 1), stopped: make(chan struct{}),
		logits: make([]float32, n*m.Hparams.Vocab), work: make([]float32, m.Hparams.Vocab),
	}
	// Drafts ride along other rows in a batched pass, but not on a
	// recurrent network, whose slot states a rejected draft would have
	// moved on; or they are verified in a pass of the one slot's tokens
	// (ForwardAll), where a recurrent state is taken back (spec.go).
	if batched && !m.Recurrent() || !batched && m.CanVerify() {
		s.drafter, s.canDraft = opts.Drafter, true
	}
	for i := range n {
		s.slots = append(s.slots, &slot{index: i, base: i * opts.Context})
	}
	s.stats.Slots = n
	go s.run()
	return s, nil
}

// Slots is the number of slots (1 when the backend cannot batch).
func (s *Scheduler) Slots() int { return len(s.slots) }

// Context is each slot's size.
func (s *Scheduler) Context() int { return s.slotCtx }

// Batched says the slots decode together in one pass.
func (s *Scheduler) Batched() bool { return s.batched }

// Submit queues r. The generation stops when ctx ends (a client that
// disconnected) or Stream.Cancel is called.
func (s *Scheduler) Submit(ctx context.Context, r Request) (*Stream, error) {
	if len(r.Prompt) == 0 {
		return nil, fmt.Errorf("%w: empty prompt", infer.ErrBadShape)
	}
	if len(r.Prompt) >= s.slotCtx {
		return nil, fmt.Errorf("%w: %d prompt tokens, a slot holds %d", ErrPromptTooLong, len(r.Prompt), s.slotCtx)
	}
	for _, id := range r.Prompt {
		if id < 0 || int(id) >= s.vocab {
			return nil, fmt.Errorf("%w: token id %d outside the vocabulary of %d", infer.ErrBadShape, id, s.vocab)
		}
	}
	if err := r.Params.Validate(); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	st := &Stream{ctx: cctx, cancel: cancel, notify: make(chan struct{}, 1)}
	if r.Lockstep {
		// The scheduler may wait on this stream's reader: a reader that
		// leaves instead must wake it too.
		st.wake = s.poke
		context.AfterFunc(cctx, s.poke)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		return nil, ErrClosed
	}
	s.queue = append(s.queue, &job{req: r, st: st, submitted: time.Now()})
	s.stats.Queued = len(s.queue)
	s.mu.Unlock()
	s.poke()
	return st, nil
}

// Stats returns the counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close stops taking requests, lets the running and queued ones finish
// (cancel their contexts to end them sooner), and returns when the
// scheduler's goroutine is done with the model.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.poke()
	<-s.stopped
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) run() {
	defer close(s.stopped)
	for {
		s.reap()
		s.assign()
		if s.busy() == 0 {
			s.mu.Lock()
			idle := s.closed && len(s.queue) == 0
			s.mu.Unlock()
			if idle {
				return
			}
			<-s.wake
			continue
		}
		if s.generating() == 0 && !s.embedding() {
			<-s.wake // the generations wait on their readers (Lockstep)
			continue
		}
		if s.generating() > 0 {
			if sl := s.chainSlot(); sl == nil || !s.chainStep(sl) {
				s.stopChains()
				s.stepHooks()
				s.step()
			}
		}
		s.embedStep()
	}
}

// waiting says sl's request waits for its reader (Request.Lockstep).
func (sl *slot) waiting() bool {
	if sl.job == nil || !sl.decoding || !sl.job.req.Lockstep {
		return false
	}
	st := sl.job.st
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.toks) > 0
}

// embedding says an Embed job holds a slot.
func (s *Scheduler) embedding() bool {
	return slices.ContainsFunc(s.slots, func(sl *slot) bool { return sl.job != nil && sl.job.embed != nil })
}

// stepHooks calls the Step hooks of the decoding slots' requests before a
// plain pass.
func (s *Scheduler) stepHooks() {
	for _, sl := range s.slots {
		if sl.job != nil && sl.decoding && sl.job.req.Step != nil && !sl.waiting() {
			sl.job.req.Step(s.m)
		}
	}
}

func (s *Scheduler) busy() int {
	n := 0
	for _, sl := range s.slots {
		if sl.job != nil {
			n++
		}
	}
	return n
}

// reap ends the requests whose context ended, and drops queued ones that
// were cancelled while waiting.
func (s *Scheduler) reap() {
	for _, sl := range s.slots {
		if sl.job != nil && sl.job.st.ctx.Err() != nil {
			s.finish(sl, "cancelled", nil)
		}
	}
	s.mu.Lock()
	var gone []*job
	s.queue = slices.DeleteFunc(s.queue, func(j *job) bool {
		if j.st != nil && j.st.ctx.Err() != nil {
			gone = append(gone, j)
			return true
		}
		return false
	})
	s.stats.Queued = len(s.queue)
	s.mu.Unlock()
	for _, j := range gone {
		j.st.finish(Result{Reason: "cancelled", PromptTokens: len(j.req.Prompt), Slot: -1})
	}
}

// assign gives waiting requests free slots, oldest request first, each to
// the free slot whose cache shares the longest prefix with its prompt.
func (s *Scheduler) assign() {
	for {
		var free []*slot
		for _, sl := range s.slots {
			if sl.job == nil {
				free = append(free, sl)
			}
		}
		if len(free) == 0 {
			return
		}
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		j := s.queue[0]
		s.queue = s.queue[1:]
		s.stats.Queued = len(s.queue)
		if j.state == nil {
			s.stats.Busy = s.busy() + 1
		}
		s.mu.Unlock()

		if j.state != nil { // Options.Forward: the one slot is free
			s.runState(free[0], j)
			continue
		}
		if j.embed != nil {
			// The slot whose cache holds least: an embedding reuses none
			// of it (every token's hidden state is wanted).
			s.startEmbed(slices.MinFunc(free, func(a, b *slot) int { return len(a.tokens) - len(b.tokens) }), j)
			continue
		}
		best, kept := free[0], -1
		for _, sl := range free {
			if n := s.reusable(sl, j.req.Prompt); n > kept {
				best, kept = sl, n
			}
		}
		s.start(best, j, kept)
	}
}

// shared is how many of prompt's first tokens the slot's cache holds,
// never the last prompt token, whose logits are needed.
func shared(sl *slot, prompt []int32) int {
	n := 0
	for n < len(sl.tokens) && n < len(prompt)-1 && sl.tokens[n] == prompt[n] {
		n++
	}
	return n
}

// reusable is how many of prompt's first tokens the slot's cache holds and
// may keep (shared); on a model whose recurrent state cannot go back, only
// where it can resume: a slot's own state is after all of its tokens, so
// there or nowhere.
func (s *Scheduler) reusable(sl *slot, prompt []int32) int {
	n := shared(sl, prompt)
	switch {
	case !s.batched:
		n = s.m.ResumePoint(n)
	case s.m.Recurrent() && n < len(sl.tokens):
		n = 0
	}
	return n
}

func (s *Scheduler) start(sl *slot, j *job, keep int) {
	sampler, err := sample.New(j.req.Params)
	if err != nil { // Submit validated them
		j.st.finish(Result{Reason: "error", Err: err, Slot: sl.index})
		return
	}
	for _, id := range j.req.Prompt {
		sampler.Accept(id)
	}
	resumed := 0
	if sl.own > 0 && keep >= sl.own {
		resumed = keep
	}
	own := j.req.Own
	if own <= 0 || own > len(j.req.Prompt) {
		own = len(j.req.Prompt)
	}
	held := shared(sl, j.req.Prompt)
	*sl = slot{
		index: sl.index, base: sl.base, tokens: sl.tokens[:keep], job: j,
		sampler: sampler, prompt: j.req.Prompt, done: keep, cached: keep, resumed: resumed, own: own,
		counts: map[int32]int{}, started: time.Now(), draft: spec.NewControl(s.maxDraft),
		shared: held, chunk: min(prefillFirstChunk, s.m.MaxBatch()),
	}
	if !s.batched && s.m.Recurrent() {
		sl.marks = j.req.Marks
	}
	if p := j.req.Prefill; p != nil {
		p(Prefill{Shared: held, Kept: keep, Total: len(j.req.Prompt) - keep})
	}
	if err := s.checkpoint(sl); err != nil {
		s.end(sl, "error", err)
	}
}

// Prefill chunks (Request.Chunk): the first is small, as nothing is
// measured yet; the smallest keeps a slow machine's passes from shrinking
// to single tokens.
const (
	prefillFirstChunk = 16
	prefillMinChunk   = 8
)

// nextChunk is how many prompt tokens the next pass reads, given that the
// last one read n in d: about target's worth, between prefillMinChunk and
// the model's largest batch.
func nextChunk(n int, d, target time.Duration, maxChunk int) int {
	if n <= 0 || d <= 0 {
		return maxChunk
	}
	want := int(float64(n) * float64(target) / float64(d))
	return max(min(want, maxChunk), min(prefillMinChunk, maxChunk))
}

// checkpoint snapshots the recurrent state where sl's reading stands, if
// that is one of its marks and the state is there.
func (s *Scheduler) checkpoint(sl *slot) error {
	if sl.job == nil || !slices.Contains(sl.marks, sl.done) || s.m.StatePos() != sl.done {
		return nil
	}
	return s.m.Checkpoint()
}

// prefillWhileDecoding is the most prompt tokens a pass takes beside
// decoding streams.
const prefillWhileDecoding = 128

// step runs one pass: a row for every decoding slot, then prompt chunks of
// prefilling slots in the room left, and samples where logits came out.
func (s *Scheduler) step() {
	s.stepping = true
	defer s.stepDone()
	s.rows, s.outs, s.owners = s.rows[:0], s.outs[:0], s.owners[:0]
	budget := s.m.MaxBatch()
	prompted, decoded, drafted := 0, 0, 0
	for _, sl := range s.slots {
		if sl.job != nil && sl.decoding && !sl.waiting() {
			decoded++
		}
	}
	for _, sl := range s.slots {
		if sl.job == nil || !sl.decoding || sl.waiting() {
			continue
		}
		sl.out = len(s.outs)
		if sl.drafted { // drafted already, by a chained step that then gave way
			sl.drafted = false
		} else {
			var err error
			if sl.drafts, err = s.draftFor(sl, budget-decoded-drafted); err != nil {
				decoded--
				s.end(sl, "error", err)
				continue
			}
		}
		for i := range 1 + len(sl.drafts) { // next, then the drafts that follow it
			id := sl.next
			if i > 0 {
				id = sl.drafts[i-1]
			}
			s.rows = append(s.rows, infer.Row{Token: id, Pos: len(sl.tokens) + i, Base: sl.base, Step: true, Seq: sl.index})
			s.outs = append(s.outs, len(s.rows)-1)
			s.owners = append(s.owners, sl)
		}
		drafted += len(sl.drafts)
	}
	if decoded > 0 {
		// Streams are decoding: a long prompt goes in smaller chunks, so
		// that their next tokens wait for one short pass, not for a
		// whole batch of prompt.
		budget = min(budget, len(s.rows)+prefillWhileDecoding)
	}
	type chunk struct {
		sl       *slot
		from, to int
	}
	var chunks []chunk
	for _, sl := range s.slots {
		if sl.job == nil || sl.decoding || sl.job.embed != nil || len(s.rows) >= budget {
			continue
		}
		if !s.batched && len(s.rows) > 0 {
			break
		}
		to := min(len(sl.prompt), sl.done+budget-len(s.rows))
		if sl.job.req.Chunk > 0 {
			to = min(to, sl.done+sl.chunk)
		}
		for _, mk := range sl.marks {
			if mk > sl.done && mk < to {
				to = mk
			}
		}
		for i := sl.done; i < to; i++ {
			s.rows = append(s.rows, infer.Row{Token: sl.prompt[i], Pos: i, Base: sl.base, Seq: sl.index})
		}
		chunks = append(chunks, chunk{sl, sl.done, to})
		prompted += to - sl.done
		if to == len(sl.prompt) {
			sl.out = len(s.outs)
			s.outs = append(s.outs, len(s.rows)-1)
			s.owners = append(s.owners, sl)
		}
	}
	t0 := time.Now()
	err := s.forward()
	took := time.Since(t0).Seconds()
	if err != nil {
		for _, sl := range s.slots {
			if sl.job != nil && sl.job.embed == nil {
				sl.tokens = sl.tokens[:0] // what the failed pass left is unknown
				s.end(sl, "error", err)
			}
		}
		return
	}
	for _, c := range chunks {
		sl, r := c.sl, &c.sl.job.req
		sl.tokens = append(sl.tokens, sl.prompt[c.from:c.to]...)
		sl.done = c.to
		if r.Chunk > 0 {
			sl.chunk = nextChunk(c.to-c.from, time.Duration(took*float64(time.Second)), r.Chunk, s.m.MaxBatch())
		}
		if r.Prefill != nil {
			r.Prefill(Prefill{Shared: sl.shared, Kept: sl.cached, Done: c.to - sl.cached, Total: len(sl.prompt) - sl.cached})
		}
		if err := s.checkpoint(sl); err != nil {
			s.end(sl, "error", err)
		}
	}
	s.cost.Add(len(s.rows), took)
	generated, accepted := 0, 0
	for j, sl := range s.owners {
		if j > 0 && s.owners[j-1] == sl || sl.job == nil {
			continue // a draft row (its slot's first row took it), or a slot that ended
		}
		if !sl.decoding { // the last chunk of a prompt
			s.sample(sl, s.logits[j*s.vocab:(j+1)*s.vocab])
			generated++
			continue
		}
		n, ok := s.sampleDrafted(sl, decoded)
		generated += n
		accepted += ok
	}
	s.mu.Lock()
	s.stats.Passes++
	s.stats.PromptTokens += int64(prompted)
	s.stats.DecodeTokens += int64(decoded + accepted)
	s.stats.Generated += int64(generated)
	s.stats.Drafted += int64(drafted)
	s.stats.Accepted += int64(accepted)
	if rows := prompted + decoded + drafted; rows > 0 {
		s.stats.PromptSeconds += took * float64(prompted) / float64(rows)
		s.stats.DecodeSeconds += took * float64(decoded+drafted) / float64(rows)
	}
	s.mu.Unlock()
}

// sampleDrafted samples a decoding slot's rows of the pass that ran: the
// row of its next token, then, while each sampled token is the draft that
// the following row ran, those rows too. It returns the tokens sampled and
// how many drafts they confirmed; decoded is how many slots decoded in the
// pass (spec.go).
func (s *Scheduler) sampleDrafted(sl *slot, decoded int) (sampled, accepted int) {
	drafts, j := sl.drafts, sl.job
	sl.drafts = nil
	j.drafted += len(drafts) // counted before sample can end the generation
	if len(drafts) > 0 {
		j.verifies++
	}
	for i := 0; ; i++ {
		sl.tokens = append(sl.tokens, sl.next) // row i ran it
		r := sl.out + i
		if sl.q = nil; i < len(drafts) && i < len(sl.dists) {
			sl.q, sl.x = sl.dists[i], drafts[i]
		}
		s.sample(sl, s.logits[r*s.vocab:(r+1)*s.vocab])
		sl.q = nil
		sampled++
		if i == len(drafts) || sl.job == nil || sl.next != drafts[i] {
			break
		}
		accepted++
		j.accepted++
	}
	extra := sl.draftTime
	if sl.verified {
		t0 := time.Now()
		s.rewind(sl)
		extra += time.Since(t0)
	}
	if len(drafts) > 0 {
		sl.draft.Verified(len(drafts), accepted, s.cost.GainTimed(decoded, len(drafts), accepted, extra.Seconds()))
	}
	// Rows past the last confirmed draft wrote cache positions beyond the
	// slot's tokens: no row sees a position past its own, and the next
	// pass writes over them.
	return sampled, accepted
}

// forward runs the pass's rows: in one ForwardRows, or, on a backend that
// cannot, as the one slot's contiguous tokens through Forward (ForwardAll
// when drafts want the logits of every row).
func (s *Scheduler) forward() error {
	if len(s.rows) == 0 {
		return nil
	}
	outs := s.outs
	if len(outs) == 0 {
		outs = []int{len(s.rows) - 1} // logits nobody reads: ForwardRows wants one
	}
	if n := len(outs) * s.vocab; len(s.logits) < n { // drafts bring rows of their own
		s.logits = make([]float32, n)
	}
	if s.batched {
		return s.m.ForwardRows(s.rows, outs, s.logits[:len(outs)*s.vocab])
	}
	s.toks = s.toks[:0]
	for _, r := range s.rows {
		s.toks = append(s.toks, r.Token)
	}
	if len(outs) > 1 { // a decoding step and its drafts: every row is an output
		if s.m.Recurrent() {
			return s.verifyRecurrent(s.owners[0])
		}
		return s.m.ForwardAll(s.toks, s.rows[0].Pos, s.logits[:len(s.toks)*s.vocab])
	}
	if err := s.m.Forward(s.toks, s.rows[0].Pos); err != nil {
		return err
	}
	copy(s.logits, s.m.Logits())
	return nil
}

// sample picks a slot's next token from its logits and decides whether the
// generation goes on.
func (s *Scheduler) sample(sl *slot, logits []float32) {
	r := &sl.job.req
	t0 := time.Now()
	pick := logits
	if (r.Presence != 0 || r.Frequency != 0) && len(sl.counts) > 0 || len(r.Ban) > 0 || len(r.Bias) > 0 {
		copy(s.work, logits)
		if r.Presence != 0 || r.Frequency != 0 {
			for id, n := range sl.counts {
				s.work[id] -= r.Presence + r.Frequency*float32(n)
			}
		}
		for id, b := range r.Bias {
			if id >= 0 && int(id) < len(s.work) {
				s.work[id] += b
			}
		}
		for _, id := range r.Ban {
			if id >= 0 && int(id) < len(s.work) {
				s.work[id] = float32(math.Inf(-1))
			}
		}
		pick = s.work
	}
	var id int32
	if sl.q != nil { // a draft model's token to decide (spec.go)
		id, _ = s.rej.Decide(sl.sampler, pick, sl.x, sl.q)
	} else {
		id = sl.sampler.Sample(pick)
	}
	if c := r.Constraint; c != nil && !c.Allowed(id) {
		// As llama.cpp does: the unconstrained pick usually fits, and the
		// whole vocabulary is masked only when it does not.
		if &pick[0] != &s.work[0] {
			copy(s.work, pick)
			pick = s.work
		}
		c.Mask(pick)
		id = sl.sampler.Sample(pick)
		if !c.Allowed(id) {
			if s.constraintEnds(r) {
				// The text is whole and only an end token may follow, but
				// the request banned those (ignore_eos): it is done.
				s.end(sl, "stop", nil)
				return
			}
			s.end(sl, "error", fmt.Errorf("slots: the constraint allows no token"))
			return
		}
	}
	if c := r.Constraint; c != nil {
		if err := c.Accept(id); err != nil {
			s.end(sl, "error", err)
			return
		}
	}
	tok := Token{ID: id}
	if r.TopLogits > 0 {
		tok.Logits = sample.Top(logits, r.TopLogits, nil)
	}
	if r.Logprobs || r.TopLogprobs > 0 {
		lse := logSumExp(logits)
		tok.Logprob = logits[id] - lse
		if r.TopLogprobs > 0 {
			tok.Top = sample.Top(logits, r.TopLogprobs, nil)
			for i := range tok.Top {
				tok.Top[i].Logit -= lse
			}
		}
	}
	tok.Sampling = time.Since(t0)
	sl.sampling += tok.Sampling
	s.emit(sl, tok)
}

// emit hands a sampled token to its stream and decides whether the
// generation goes on.
func (s *Scheduler) emit(sl *slot, tok Token) {
	r, id := &sl.job.req, tok.ID
	sl.sampler.Accept(id)
	sl.counts[id]++
	sl.generated++
	if sl.generated == 1 {
		sl.first = time.Now()
	}
	tok.Drafted, tok.Accepted, tok.Verifies = sl.job.drafted, sl.job.accepted, sl.job.verifies
	sl.job.st.push(tok)
	switch {
	case r.End != nil && r.End(id):
		s.end(sl, "stop", nil)
	case r.MaxTokens > 0 && sl.generated >= r.MaxTokens, sl.held() >= s.slotCtx:
		s.end(sl, "length", nil)
	default:
		sl.next, sl.decoding = id, true
	}
}

// constraintEnds says the request's constraint allows one of the end
// tokens it banned.
func (s *Scheduler) constraintEnds(r *Request) bool {
	return r.End != nil && slices.ContainsFunc(r.Ban, func(id int32) bool { return r.End(id) && r.Constraint.Allowed(id) })
}

// end finishes a slot's request and frees the slot; its cache keeps the
// tokens run so far for a later prompt that starts with them.
func (s *Scheduler) end(sl *slot, reason string, err error) {
	j := sl.job
	if cerr := s.stopChain(sl); cerr != nil && err == nil {
		reason, err = "error", cerr
	}
	res := Result{
		Reason: reason, Err: err, PromptTokens: len(sl.prompt), CachedTokens: sl.cached, Resumed: sl.resumed,
		CompletionTokens: sl.generated, Held: len(sl.tokens), Queued: sl.started.Sub(j.submitted), Slot: sl.index,
		Drafted: j.drafted, Accepted: j.accepted, Verifies: j.verifies, Sampling: sl.sampling,
	}
	if !sl.first.IsZero() {
		res.TTFT = sl.first.Sub(j.submitted)
		res.Decode = time.Since(sl.first)
	}
	if !s.batched && err != nil {
		s.m.Drop()
	}
	sl.job, sl.sampler, sl.prompt, sl.counts, sl.decoding = nil, nil, nil, nil, false
	s.mu.Lock()
	s.stats.Requests++
	s.stats.CachedTokens += int64(res.CachedTokens)
	s.stats.Busy = s.busy()
	s.mu.Unlock()
	s.finishStream(j.st, res)
}

func logSumExp(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v - m))
	}
	return m + float32(math.Log(sum))
}
