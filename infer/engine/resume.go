package engine

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/config/atomicfile"
	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// Resuming a chat without reading it again. When a chat's conversation
// leaves the cache (the engine closes, Reset, another session's reply, a
// model or backend switch), the engine writes what the cache holds for it
// to Options.StateDir (infer.Sequence.WriteState), one file per stored
// session; when a session's reply finds the cache empty, it reads that
// file back if the state belongs to this model, context, cache type and
// backend (infer.StateFingerprint) and its tokens begin the conversation,
// and otherwise says why it reads the conversation again. Reading 4,000
// tokens of the 1.7B back takes a fraction of a second; prefilling them
// took 92 s on 2 CPU threads (issue 32).

// Saved states are bounded: beyond DefaultStateFiles files or
// DefaultStateBudget bytes (Options.StateFiles, StateBudget) the least
// recently used go. A 4,096-token state of the 1.7B takes 470 MB.
const (
	DefaultStateBudget = 4 << 30
	DefaultStateFiles  = 8
)

// stateExt names a saved state: the session id, then this.
const stateExt = ".kvstate"

// sessionState is which stored session the cache's conversation belongs
// to.
type sessionState struct {
	id    int64 // 0: none known
	dirty bool  // the cache changed since it was saved or restored
}

type bindRequest struct{ id int64 }
type forgetRequest struct{ id int64 }

// BindSession says that the conversation in the cache is stored session
// id from now on: a chat whose session was created after its first reply
// calls it, so that closing it saves its state under that session.
func (e *Engine) BindSession(id int64) { e.send(bindRequest{id}) }

// ForgetSession deletes session id's saved state (the session was
// deleted); if the cache holds its conversation, it is not saved.
func (e *Engine) ForgetSession(id int64) { e.send(forgetRequest{id}) }

// forget is ForgetSession's work.
func (e *Engine) forget(id int64) {
	if e.sess.id == id {
		e.sess = sessionState{}
	}
	if e.opts.StateDir != "" {
		if err := RemoveSavedState(e.opts.StateDir, id); err != nil {
			slog.Warn("deleting a saved state", "session", id, "err", err)
		}
	}
}

// StatePath is where the state of session id is saved in dir.
func StatePath(dir string, id int64) string {
	return filepath.Join(dir, strconv.FormatInt(id, 10)+stateExt)
}

// RemoveSavedState deletes session id's saved state in dir, if any (the
// session was deleted).
func RemoveSavedState(dir string, id int64) error {
	if err := os.Remove(StatePath(dir, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// PruneSavedStates deletes the saved states in dir of the sessions keep
// rejects (those deleted since), and the files crashed saves left.
func PruneSavedStates(dir string, keep func(id int64) bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ent := range entries {
		name := ent.Name()
		if strings.HasPrefix(name, ".") && strings.Contains(name, stateExt+".tmp-") {
			// Another chat may be writing it: only one left for an hour
			// is a crash's.
			if fi, err := ent.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		id, ok := stateID(name)
		if ok && !keep(id) {
			os.Remove(filepath.Join(dir, name))
		}
	}
	return nil
}

// stateID is the session id a state file's name carries.
func stateID(name string) (int64, bool) {
	s, ok := strings.CutSuffix(name, stateExt)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0
}

// modelIdentity names the model file for a state's fingerprint: its path,
// size and modification time, and a hash of its tensor table and of each
// tensor's first bytes, so that a file rewritten in place with other
// weights is told apart even where times are coarse.
func modelIdentity(f *gguf.File) string {
	h := sha256.New()
	path := f.Path
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	fmt.Fprintf(h, "%q\n", path)
	if fi, err := os.Stat(f.Path); err == nil {
		fmt.Fprintf(h, "%d %d\n", fi.Size(), fi.ModTime().UnixNano())
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		fmt.Fprintf(h, "%s %d %v %d %d\n", t.Name, t.Type, t.Shape, t.Offset, t.Size)
		d := f.Data(t)
		h.Write(d[:min(len(d), 64)])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func (e *Engine) fingerprint() infer.StateFingerprint {
	return e.cur.model.StateFingerprint(modelIdentity(e.cur.file))
}

// bindRequest's work: the conversation in the cache becomes session id's.
// A cache that held another session's is saved for it first, and left
// empty.
func (e *Engine) bind(id int64) {
	if id == e.sess.id {
		return
	}
	if e.sess.id != 0 {
		e.persist()
		if e.cur.sched != nil {
			e.forgetCache()
		}
		e.sess = sessionState{id: id}
		return
	}
	e.sess.id = id // the chat got its session: the cache is its
}

// resume readies the cache for a reply in session id to the conversation
// ids: the conversation goes to id (bind), and an empty cache is filled
// from the session's saved state when it fits (restore).
func (e *Engine) resume(id int64, ids []int32) {
	e.bind(id)
	if id != 0 && e.opts.StateDir != "" && e.cached() == 0 {
		e.restore(id, ids)
	}
	e.sess.dirty = true // the reply about to run changes the cache
}

// restore fills the empty cache from session id's saved state if it
// belongs to this model and begins ids, and says why not otherwise.
func (e *Engine) restore(id int64, ids []int32) {
	path := StatePath(e.opts.StateDir, id)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	rebuild := func(why string) {
		e.emit(Notice{Text: "reading the conversation again: " + why})
	}
	if err != nil {
		slog.Warn("saved state", "path", path, "err", err)
		rebuild("its saved state cannot be read")
		return
	}
	defer f.Close()
	if _, ok := e.cur.model.Backend().(infer.KVStateIO); !ok {
		// The file stays for the backend that wrote it.
		rebuild(fmt.Sprintf("restoring a saved state is not supported on the %s backend", e.cur.model.Backend().Name()))
		return
	}
	fi, err := f.Stat()
	if err != nil {
		rebuild("its saved state cannot be read")
		return
	}
	discard := func(err error) {
		slog.Warn("saved state discarded", "path", path, "err", err)
		f.Close()
		os.Remove(path)
	}
	st, err := infer.ReadState(bufio.NewReaderSize(f, 256<<10), fi.Size())
	if err != nil {
		discard(err)
		rebuild("its saved state is damaged")
		return
	}
	if why := st.Fingerprint.Diff(e.fingerprint()); why != "" {
		discard(errors.New(why))
		rebuild("its saved state does not fit: " + why)
		return
	}
	n := st.Usable(ids)
	if n == 0 {
		rebuild("the conversation changed since its state was saved")
		return
	}
	if err := e.withCache(st.Restore); err != nil {
		discard(err)
		rebuild("its saved state is damaged")
		return
	}
	now := time.Now()
	os.Chtimes(path, now, now) // used: the last to go (trimStates)
	e.sess.dirty = false
	e.emit(Notice{Text: fmt.Sprintf("resumed from the saved state: %d tokens not read again", n)})
}

// persist saves the cache's conversation for its session, if it changed
// since it was saved or restored, and keeps the saved states within their
// bounds. A failure (a full disk) leaves the previous file, logged: the
// chat itself is in the session store.
func (e *Engine) persist() {
	if e.opts.StateDir == "" || e.sess.id == 0 || !e.sess.dirty || e.cur.model == nil || e.cached() == 0 {
		return
	}
	if _, ok := e.cur.model.Backend().(infer.KVStateIO); !ok {
		return
	}
	e.sess.dirty = false
	if err := os.MkdirAll(e.opts.StateDir, 0o700); err != nil {
		slog.Warn("saving the model state", "err", err)
		return
	}
	path := StatePath(e.opts.StateDir, e.sess.id)
	fp := e.fingerprint()
	err := atomicfile.Write(path, 0o600, func(w io.Writer) error {
		return e.withCache(func(seq *infer.Sequence) error { return seq.WriteState(w, fp) })
	})
	if err != nil {
		slog.Warn("saving the model state", "session", e.sess.id, "err", err)
	}
	e.trimStates(path)
}

// trimStates deletes the least recently used saved states beyond the
// files and bytes allowed; fresh (just written) goes only if it alone is
// over the budget.
func (e *Engine) trimStates(fresh string) {
	budget, files := e.opts.StateBudget, e.opts.StateFiles
	if budget <= 0 {
		budget = DefaultStateBudget
	}
	if files <= 0 {
		files = DefaultStateFiles
	}
	entries, err := os.ReadDir(e.opts.StateDir)
	if err != nil {
		return
	}
	type state struct {
		path string
		fi   fs.FileInfo
	}
	var states []state
	for _, ent := range entries {
		if _, ok := stateID(ent.Name()); !ok {
			continue
		}
		if fi, err := ent.Info(); err == nil {
			states = append(states, state{filepath.Join(e.opts.StateDir, ent.Name()), fi})
		}
	}
	// Newest first, the fresh one before all.
	slices.SortFunc(states, func(a, b state) int {
		if (a.path == fresh) != (b.path == fresh) {
			if a.path == fresh {
				return -1
			}
			return 1
		}
		return b.fi.ModTime().Compare(a.fi.ModTime())
	})
	var total int64
	for i, s := range states {
		total += s.fi.Size()
		if i >= files || total > budget {
			os.Remove(s.path)
		}
	}
}
