package serve

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/grammar"
	"github.com/bonsai-chat/bonsai/infer/slots"
	"github.com/bonsai-chat/bonsai/infer/spec"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// Model is what a Server runs: the scheduler over the loaded model, and
// the vocabulary and template that turn messages into its tokens (the
// chat's own: infer/chat, infer/tokenizer).
type Model struct {
	Sched        *slots.Scheduler
	Tok          *tokenizer.Tokenizer
	Tmpl         *chat.Template
	ID           string          // the model's name in the API
	Defaults     engine.Sampling // the model's recommended sampling
	ContextTrain int
	Params       int64
	FileBytes    int64
	Info         infer.BackendInfo
	// Notes are what loading said the operator should know.
	Notes []string
	// Spec is the slots' speculation mode.
	Spec spec.Mode

	aliases []string
	// maxPiece is the most bytes one token spells: a text of n bytes is
	// at least n/maxPiece tokens.
	maxPiece int
	ends     map[int32]bool
	endIDs   []int32

	vocabOnce sync.Once
	vocab     *grammar.Vocab

	model *infer.Model
	file  *gguf.File
}

// ErrDraftUnsupported: the server's slots draft by prompt lookup only.
var ErrDraftUnsupported = errors.New("serve: speculation with a draft model is not supported (use prompt lookup, spec.NGram)")

// LoadOptions say what to load.
type LoadOptions struct {
	Path    string        // the GGUF file (Load)
	ID      string        // the API's model id; "" the file's name without .gguf
	Slots   int           // sequences decoded together; 0: 4
	Context int           // tokens per slot; 0: infer.DefaultContext capped by the model
	KV      infer.KVTypes // the KV cache's types
	Threads int
	Batch   int    // most tokens per pass; 0: infer.DefaultBatch
	Backend string // "cpu" (default), "gpu", "auto"
	Adapter string // GPU adapter name (substring match)
	GPU     infer.GPUOptions
	// Spec is the slots' speculation: spec.NGram (prompt lookup) or off;
	// a draft model is refused (ErrDraftUnsupported).
	Spec spec.Options
	// Progress, if set, reports the weights bound so far.
	Progress func(done, total int64)
}

// Load opens the file and loads the model with a KV cache of Slots ×
// Context positions.
func Load(o LoadOptions) (*Model, error) {
	f, err := gguf.Open(o.Path)
	if err != nil {
		return nil, err
	}
	m, err := LoadFile(f, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.file = f
	return m, nil
}

// LoadFile is Load of a file already open (o.Path is not used); the file
// must stay open until the Model is closed, and the caller closes it.
func LoadFile(f *gguf.File, o LoadOptions) (*Model, error) {
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	arch, err := infer.ArchOf(f)
	if err != nil {
		return nil, err
	}
	hp, err := infer.ReadHyperparams(f, arch)
	if err != nil {
		return nil, err
	}
	n := o.Slots
	if n == 0 {
		n = 4
	}
	ctx := infer.ContextFor(o.Context, hp)
	if n < 1 || ctx < 2 {
		return nil, fmt.Errorf("%w: %d slots of %d tokens", infer.ErrBadShape, n, ctx)
	}
	backend := o.Backend
	if backend == "" {
		backend = "cpu"
	}
	im, err := infer.Load(f, infer.Options{Backend: backend, Adapter: o.Adapter, GPU: o.GPU, Threads: o.Threads, Context: n * ctx, KV: o.KV, Batch: o.Batch, Snapshots: -1, Progress: o.Progress})
	if err != nil {
		return nil, err
	}
	var notes []string
	if !im.RowsSupported() && n > 1 {
		// A backend or network that cannot batch sequences has one cache:
		// one slot of the whole context.
		im.Close()
		notes = append(notes, fmt.Sprintf("the %s backend cannot decode several sequences in one pass for this model: one slot", backend))
		n = 1
		if im, err = infer.Load(f, infer.Options{Backend: backend, Adapter: o.Adapter, GPU: o.GPU, Threads: o.Threads, Context: ctx, KV: o.KV, Batch: o.Batch, Progress: o.Progress}); err != nil {
			return nil, err
		}
	}
	if ctx > hp.ContextTrain {
		notes = append(notes, fmt.Sprintf("a context of %d tokens per slot is beyond the %d this model was trained on", ctx, hp.ContextTrain))
	}
	mode := cmp.Or(o.Spec.Mode, spec.Off)
	so := slots.Options{Model: im, Slots: n, Context: ctx, MaxDraft: o.Spec.MaxDraft}
	switch mode {
	case spec.NGram:
		switch {
		case !im.RowsSupported() && !im.CanVerify():
			notes = append(notes, "speculation is off: this backend cannot verify drafts for this model")
			mode = spec.Off
		case !o.Spec.LookupOn(im.Backend().Name()):
			// As in the chat: prompt lookup measured slower there, drafts
			// breaking the chained steps (spec.Options.Auto).
			notes = append(notes, "prompt lookup is off on the GPU unless asked for (--spec ngram)")
			mode = spec.Off
		case im.Recurrent():
			notes = append(notes, "speculation is off: a rejected draft would move this model's recurrent state on")
			mode = spec.Off
		default:
			so.Drafter = spec.LookupDrafter(spec.NewNgram())
		}
	case spec.Off:
	default:
		im.Close()
		return nil, fmt.Errorf("%w: %s", ErrDraftUnsupported, mode)
	}
	sched, err := slots.New(so)
	if err != nil {
		im.Close()
		return nil, err
	}
	name, _ := f.KV.String("general.name")
	var base string
	if f.Path != "" {
		base = strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))
	}
	id := cmp.Or(o.ID, cleanID(base), cleanID(name), "bonsai")
	tmpl := chat.FromGGUF(f.KV)
	m := &Model{
		Sched: sched, Tok: tok, Tmpl: tmpl, ID: id, Defaults: engine.DefaultSampling(im.Variant),
		ContextTrain: hp.ContextTrain, Params: infer.Params(f), FileBytes: im.Memory(0).FileBytes,
		Info: im.Backend().Info(), Notes: notes, Spec: mode, aliases: []string{base, name}, ends: map[int32]bool{}, model: im,
	}
	for id := range int32(tok.Vocab()) {
		m.maxPiece = max(m.maxPiece, len(tok.Piece(id)), 1)
	}
	for _, e := range tok.EOGs() {
		m.ends[e] = true
	}
	for _, e := range tmpl.StopIDs(tok.ID) {
		m.ends[e] = true
	}
	for e := range m.ends {
		m.endIDs = append(m.endIDs, e)
	}
	slices.Sort(m.endIDs)
	return m, nil
}

// cleanID makes a file's or model's name an API id, one token that
// clients can put anywhere: "(embedded) bonsai-tiny" is "bonsai-tiny".
// Parenthesized notes go; other characters outside letters, digits and
// ".-_:/" become "-".
func cleanID(name string) string {
	var b strings.Builder
	depth := 0
	for _, r := range name {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth = max(depth-1, 0)
		case depth > 0:
		case unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(".-_:/", r):
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	id := strings.Trim(b.String(), "-")
	for strings.Contains(id, "--") {
		id = strings.ReplaceAll(id, "--", "-")
	}
	return id
}

// answersTo says the API name id means this model: its id, its file name,
// its general.name, or no name at all.
func (m *Model) answersTo(id string) bool {
	return id == "" || id == m.ID || slices.Contains(m.aliases, id)
}

func (m *Model) isEnd(id int32) bool { return m.ends[id] }

// grammarVocab is the vocabulary arranged for constrained decoding, built
// at the first request that needs it.
func (m *Model) grammarVocab() *grammar.Vocab {
	m.vocabOnce.Do(func() {
		m.vocab = grammar.NewVocab(m.Tok.Vocab(), m.Tok.Piece, m.Tok.IsControl, m.endIDs)
	})
	return m.vocab
}

// Close lets the running generations finish, then releases the model and
// the file.
func (m *Model) Close() {
	m.Sched.Close()
	m.model.Close()
	if m.file != nil {
		m.file.Close()
	}
}
