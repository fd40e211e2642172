// Package engine runs a model on its own goroutine. That goroutine is the only
// owner of the model and its KV cache; clients (the TUI, `bonsai run`, tests)
// send requests and receive events, so everything the TUI shows is also
// testable without a terminal.
package engine

import (
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/sample"
)

// Client is what a front end needs from an engine. The real engine and the
// TUI tests' fake both implement it. Methods never block on inference: results
// arrive on Events.
type Client interface {
	// Events delivers everything the engine reports, in order. It is closed
	// after Close.
	Events() <-chan Event
	// Generate starts a reply to the conversation. The engine reuses the KV
	// cache for the longest prefix it already holds, so resuming or
	// continuing a chat only prefills what is new.
	Generate(req GenerateRequest)
	// Stop ends the current generation; a Done event with Reason "stopped"
	// follows, after the partial reply's tokens.
	Stop()
	// SwitchBackend reloads the model on another backend ("cpu", "gpu",
	// "auto"), reporting LoadProgress and then Loaded (or Error and staying on
	// the old one).
	SwitchBackend(name string)
	// SwitchModel replaces the model with the GGUF file at path, on the
	// backend in use (LoadProgress, then Loaded; or Error, keeping the old
	// model). The KV cache starts afresh: the next Generate prefills the
	// whole conversation under the new model.
	SwitchModel(path string)
	// Reset forgets the KV cache (a new conversation).
	Reset()
	// Close stops the engine and releases the model.
	Close()
}

// Sampling parameters. Zero Temperature means greedy.
type Sampling struct {
	Temperature   float32
	TopK          int
	TopP          float32
	MinP          float32
	RepeatPenalty float32
	RepeatLastN   int
	Seed          uint64
}

// GenerateRequest asks for the next assistant turn.
type GenerateRequest struct {
	Messages  []chat.Message
	Think     bool // thinking on: the model may reason (between its template's ThinkTags) before answering
	MaxTokens int  // 0: until end of turn or context
	Sampling  *Sampling
	// Raw, when set, is the prompt itself, without the chat template
	// (`bonsai run --raw`); Messages and Think are then not used.
	Raw string
	// Steps asks for a Step event for every sampled token (`bonsai run
	// --format jsonl`), with the TopLogits largest logits of that step.
	Steps     bool
	TopLogits int
	// Session is the stored session the conversation is (0: none yet):
	// the engine saves its model state under it when the conversation
	// leaves the cache, and restores it when the session is resumed
	// (Options.StateDir).
	Session int64
}

// Event is one of the types below.
type Event interface{ isEvent() }

// LoadProgress reports model loading (mapping, uploading to the GPU, ...).
type LoadProgress struct {
	Stage       string
	Done, Total int64
}

// Loaded says a model is ready on a backend.
type Loaded struct{ Info ModelInfo }

// PrefillProgress reports prompt processing of long inputs (resumed chats).
type PrefillProgress struct{ Done, Total int }

// Token is one piece of streamed text. Thinking marks reasoning (inside
// the template's ThinkTags: <think>, or Mistral's [THINK]).
type Token struct {
	ID       int32
	Text     string
	Thinking bool
}

// Step is one sampled token, sent only when the request asks for Steps:
// its id, the text it decoded to (before the thinking parser; an
// incomplete UTF-8 sequence shows up in a later step) and, if asked for,
// the largest logits it was sampled from, largest first. The end-of-turn
// token has a Step too; ID −1 carries text held back until a Stop.
type Step struct {
	ID   int32
	Text string
	Top  []sample.Logit
}

// Stats is sent during decoding (about every token) and with Done.
type Stats struct {
	PrefillTokens int
	DecodeTokens  int
	PrefillTPS    float64
	DecodeTPS     float64
	TTFT          time.Duration
	ContextUsed   int
	ContextSize   int
	KVUsedBytes   int64
	KVAllocBytes  int64
	// A recurrent model's state beside the KV cache (zero otherwise): the
	// recurrent state and the snapshots held now, and the most they take.
	StateBytes    int64
	StateMaxBytes int64
	// Speculative decoding (Options.Spec): tokens drafted and accepted
	// in this reply, and the verify passes that judged them.
	Drafted  int
	Accepted int
	Verifies int
}

// AcceptRate is the share of drafted tokens accepted, 0 when none were.
func (s Stats) AcceptRate() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// Notice is something the user should know that is not an error: a
// recurrent model re-reading the conversation from the start, for instance.
type Notice struct{ Text string }

// ProfileSample carries per-phase timings (only while profiling is on).
// Prompt marks the timings of reading a prompt, sent once it is read;
// the others are decoding steps (on the GPU only some steps are timed, so
// a sample may hold none: Sample.Tokens 0).
type ProfileSample struct {
	Sample profile.Sample
	Prompt bool
}

// Done ends a generation. Reason is "stop" (end of turn), "length"
// (MaxTokens or context full), or "stopped" (Stop was called).
type Done struct {
	Reason string
	Stats  Stats
}

// Error reports a failure; the engine stays usable unless Fatal. NoModel
// says that no model is loaded (the first load failed): the engine still
// serves SwitchBackend and SwitchModel, and replies once one succeeds.
type Error struct {
	Err     error
	Fatal   bool
	NoModel bool
}

func (LoadProgress) isEvent()    {}
func (Loaded) isEvent()          {}
func (PrefillProgress) isEvent() {}
func (Token) isEvent()           {}
func (Stats) isEvent()           {}
func (ProfileSample) isEvent()   {}
func (Notice) isEvent()          {}
func (Step) isEvent()            {}
func (Done) isEvent()            {}
func (Error) isEvent()           {}

// ModelInfo describes the loaded model and where it runs (the status line and
// the backend panel show it).
type ModelInfo struct {
	Path         string
	Name         string // general.name, or the file name
	Arch         string // general.architecture
	Variant      string // e.g. "Bonsai-1.7B", "Ternary-Bonsai-8B", "Qwen3 (other)"
	Params       int64
	FileBytes    int64
	WeightBytes  int64
	ContextSize  int
	KVAllocBytes int64
	// A recurrent model's state (zero otherwise): the recurrent state, and
	// the most its snapshots at turn boundaries take.
	RecurrentBytes int64
	SnapshotBytes  int64
	Backend        string // "cpu" or "gpu"
	Adapter        string // GPU adapter name and driver; CPU model on cpu
	Threads        int
	SIMD           string   // "avx512-vnni", "avx2", "generic"
	Details        []string // backend specifics (limits, memory estimate), one line each
	// Fallback is why auto runs on the CPU: the GPU backend's refusal
	// ("" when auto took the GPU, or a backend was named).
	Fallback string
	// Sampling is the model's recommended sampling (DefaultSampling), what
	// a client's own settings go on top of.
	Sampling Sampling
}
