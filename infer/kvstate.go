package infer

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
)

// A conversation's model state saved to a file, so that a chat resumed in
// a new process (`bonsai -c`) continues from it instead of reading the
// whole conversation again: the KV cache rows in use, a recurrent network's
// state and snapshots, and the token ids they belong to. llama.cpp's
// --prompt-cache and its server's slot save/restore are the same idea.
//
// The file is
//
//	"BONSAIKV" | version u32 | header length u32 | header (JSON)
//	tokens (int32 × Tokens) | KV (KVBytes, the backend's own layout)
//	[recurrent state at Tokens (f32 × StateFloats)] | snapshots (f32 × StateFloats each)
//	CRC-32C of everything before it (u32)
//
// all little-endian. The header's fingerprint says what the state belongs
// to; a reader refuses a state whose fingerprint differs from the model's
// (StateFingerprint.Diff), as KV rows of another model, context or cache
// type would be silently wrong.

// KVStateIO is implemented by a backend that can copy the first positions
// of its KV cache out and back (Sequence.WriteState, SavedState.Restore).
// The bytes are the backend's own layout: a state is only ever read back by
// the backend kind that wrote it (StateFingerprint.Backend).
type KVStateIO interface {
	// KVStateBytes is how many bytes SaveKV writes for n positions.
	KVStateBytes(n int) int64
	// SaveKV writes K and V of positions 0 … n−1 of every layer to w.
	SaveKV(w io.Writer, n int) error
	// LoadKV reads what SaveKV wrote for n positions into the cache,
	// outside a pass; positions ≥ n are left as they are.
	LoadKV(r io.Reader, n int) error
}

// Sentinel errors of saved states.
var (
	// ErrStateUnsupported: the backend cannot save or restore its KV cache.
	ErrStateUnsupported = errors.New("saving the model state is not supported on this backend")
	// ErrBadState: a state file is not one (truncated, corrupt, another
	// version, sizes that do not add up).
	ErrBadState = errors.New("unreadable saved state")
)

const (
	stateMagic   = "BONSAIKV"
	stateVersion = 1
	// stateMaxHeader bounds the JSON header a reader accepts.
	stateMaxHeader = 1 << 16
)

// StateFingerprint is what a saved state belongs to. Two states are
// interchangeable only when their fingerprints are equal.
type StateFingerprint struct {
	// Model identifies the model file (the caller's choice: its path,
	// size and modification time, and a hash of its tensor table).
	Model   string `json:"model"`
	Arch    string `json:"arch"`
	Context int    `json:"context"`
	// CacheK and CacheV are the KV cache's element types (as llama.cpp's
	// --cache-type-k/v name them: "f16", "q8_0").
	CacheK    string        `json:"cache_k"`
	CacheV    string        `json:"cache_v"`
	Backend   string        `json:"backend"`
	KV        KVSpec        `json:"kv"`
	Recurrent RecurrentSpec `json:"recurrent"`
}

// Diff says in the user's words how a saved state's fingerprint (f)
// differs from the model's (want), "" when it does not.
func (f StateFingerprint) Diff(want StateFingerprint) string {
	switch {
	case f.Model != want.Model || f.Arch != want.Arch:
		return "the model file has changed"
	case f.Context != want.Context:
		return fmt.Sprintf("the context size changed (%d, now %d)", f.Context, want.Context)
	case f.CacheK != want.CacheK || f.CacheV != want.CacheV:
		return fmt.Sprintf("the KV cache type changed (%s/%s, now %s/%s)", f.CacheK, f.CacheV, want.CacheK, want.CacheV)
	case f.Backend != want.Backend:
		return fmt.Sprintf("it was saved on the %s backend, this is %s", f.Backend, want.Backend)
	case f != want:
		return "the model's shape differs"
	}
	return ""
}

// StateFingerprint is m's fingerprint with model as its file's identity.
func (m *Model) StateFingerprint(model string) StateFingerprint {
	fp := StateFingerprint{
		Model: model, Arch: m.Hparams.Arch, Context: m.context,
		CacheK: m.kvTypes.K.String(), CacheV: m.kvTypes.V.String(),
		KV: m.KVSpec(), Recurrent: m.rspec,
	}
	if m.backend != nil {
		fp.Backend = m.backend.Name()
	}
	return fp
}

// stateHeader is the JSON header of a state file.
type stateHeader struct {
	Fingerprint StateFingerprint `json:"fingerprint"`
	Tokens      int              `json:"tokens"`
	KVBytes     int64            `json:"kv_bytes"`
	// StateFloats is the size of one recurrent state (0 without one); Live
	// says the state at Tokens follows, Snapshots the positions of the
	// snapshots after it.
	StateFloats int64 `json:"state_floats"`
	Live        bool  `json:"live"`
	Snapshots   []int `json:"snapshots,omitempty"`
}

// payload is the bytes after the header, the CRC included.
func (h *stateHeader) payload() int64 {
	states := int64(len(h.Snapshots))
	if h.Live {
		states++
	}
	return 4*int64(h.Tokens) + h.KVBytes + 4*h.StateFloats*states + 4
}

func (h *stateHeader) check() error {
	fp := h.Fingerprint
	switch {
	case h.Tokens <= 0 || h.Tokens > fp.Context:
		return fmt.Errorf("%w: %d tokens in a context of %d", ErrBadState, h.Tokens, fp.Context)
	case h.KVBytes < 0 || h.KVBytes > 1<<40:
		return fmt.Errorf("%w: %d bytes of KV cache", ErrBadState, h.KVBytes)
	case h.StateFloats != fp.Recurrent.Floats() || h.StateFloats > 1<<34:
		return fmt.Errorf("%w: a recurrent state of %d floats, the fingerprint's has %d", ErrBadState, h.StateFloats, fp.Recurrent.Floats())
	case h.StateFloats == 0 && (h.Live || len(h.Snapshots) > 0):
		return fmt.Errorf("%w: recurrent state without a recurrent network", ErrBadState)
	case len(h.Snapshots) > 64:
		return fmt.Errorf("%w: %d snapshots", ErrBadState, len(h.Snapshots))
	}
	for i, p := range h.Snapshots {
		if p <= 0 || p > h.Tokens || (i > 0 && p <= h.Snapshots[i-1]) {
			return fmt.Errorf("%w: snapshot positions %v for %d tokens", ErrBadState, h.Snapshots, h.Tokens)
		}
	}
	return nil
}

// WriteState writes what the sequence's cache holds to w: its tokens, the
// KV cache rows they fill and, on a recurrent network, the state at its
// end (if it belongs there) and the snapshots, under fp
// (Model.StateFingerprint). It fails with ErrStateUnsupported on a backend
// that cannot read its cache back, and does nothing to the sequence.
func (s *Sequence) WriteState(w io.Writer, fp StateFingerprint) error {
	m := s.m
	kvio, ok := m.backend.(KVStateIO)
	if !ok {
		return fmt.Errorf("%w (%s)", ErrStateUnsupported, m.backend.Name())
	}
	n := len(s.tokens)
	if n == 0 {
		return fmt.Errorf("%w: nothing to save", ErrBadShape)
	}
	h := stateHeader{Fingerprint: fp, Tokens: n, KVBytes: kvio.KVStateBytes(n)}
	var snaps []snapshot
	if m.Recurrent() {
		h.StateFloats = m.rspec.Floats()
		h.Live = m.statePos == n
		for _, sn := range m.snaps {
			if sn.pos < n || (sn.pos == n && !h.Live) {
				snaps = append(snaps, sn)
				h.Snapshots = append(h.Snapshots, sn.pos)
			}
		}
		if !h.Live && len(snaps) == 0 {
			return errors.New("the recurrent state belongs to none of the cached positions: nothing to resume from")
		}
	}
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<20)
	var pre [16]byte
	copy(pre[:], stateMagic)
	binary.LittleEndian.PutUint32(pre[8:], stateVersion)
	binary.LittleEndian.PutUint32(pre[12:], uint32(len(js)))
	bw.Write(pre[:])
	bw.Write(js)
	if err := binary.Write(bw, binary.LittleEndian, s.tokens); err != nil {
		return err
	}
	if err := kvio.SaveKV(bw, n); err != nil {
		return fmt.Errorf("saving the KV cache: %w", err)
	}
	if h.Live {
		buf := make([]float32, h.StateFloats)
		if err := m.backend.ReadRecurrentState(buf); err != nil {
			return fmt.Errorf("saving the recurrent state: %w", err)
		}
		if err := writeFloats(bw, buf); err != nil {
			return err
		}
	}
	for _, sn := range snaps {
		if err := writeFloats(bw, sn.state); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return binary.Write(w, binary.LittleEndian, crc.Sum32())
}

// SavedState is a state file whose header and tokens are read: enough to
// decide whether to restore it, which reads the rest.
type SavedState struct {
	Fingerprint StateFingerprint
	// Tokens are the token ids the state belongs to.
	Tokens []int32
	// Live says the recurrent state at len(Tokens) is saved; Snapshots
	// are the positions of the snapshots saved beside it.
	Live      bool
	Snapshots []int

	hdr stateHeader
	r   io.Reader // the rest of the file
	crc hash.Hash32
}

// ReadState reads a state file's header and tokens from r, which holds
// size bytes. A file that is not a whole state of this version fails with
// ErrBadState before its payload is read.
func ReadState(r io.Reader, size int64) (*SavedState, error) {
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	tr := io.TeeReader(r, crc)
	var pre [16]byte
	if _, err := io.ReadFull(tr, pre[:]); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadState, err)
	}
	if string(pre[:8]) != stateMagic {
		return nil, fmt.Errorf("%w: not a bonsai state file", ErrBadState)
	}
	if v := binary.LittleEndian.Uint32(pre[8:]); v != stateVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", ErrBadState, v, stateVersion)
	}
	hlen := int64(binary.LittleEndian.Uint32(pre[12:]))
	if hlen > stateMaxHeader || 16+hlen > size {
		return nil, fmt.Errorf("%w: a header of %d bytes in a file of %d", ErrBadState, hlen, size)
	}
	js := make([]byte, hlen)
	if _, err := io.ReadFull(tr, js); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadState, err)
	}
	var h stateHeader
	if err := json.Unmarshal(js, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadState, err)
	}
	if err := h.check(); err != nil {
		return nil, err
	}
	if want := 16 + hlen + h.payload(); want != size {
		return nil, fmt.Errorf("%w: %d bytes, its header describes %d", ErrBadState, size, want)
	}
	tokens := make([]int32, h.Tokens)
	if err := binary.Read(tr, binary.LittleEndian, tokens); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadState, err)
	}
	return &SavedState{Fingerprint: h.Fingerprint, Tokens: tokens, Live: h.Live, Snapshots: h.Snapshots, hdr: h, r: tr, crc: crc}, nil
}

// Usable is how many of the saved tokens a prefill of prompt could keep
// after Restore: the saved tokens it starts with (never its last token,
// whose logits are needed), or on a recurrent network the latest position
// among those where a saved state belongs.
func (st *SavedState) Usable(prompt []int32) int {
	shared := 0
	for shared < len(st.Tokens) && shared < len(prompt)-1 && st.Tokens[shared] == prompt[shared] {
		shared++
	}
	if st.hdr.StateFloats == 0 {
		return shared
	}
	if st.Live && len(st.Tokens) <= shared {
		return len(st.Tokens)
	}
	best := 0
	for _, p := range st.Snapshots {
		if p <= shared {
			best = p
		}
	}
	return best
}

// Restore reads the rest of the state into s's model, whose fingerprint
// the caller has checked against Fingerprint: afterwards the sequence
// holds Tokens. On any error the sequence is empty (Reset), and an error
// in the file wraps ErrBadState. It reads the file once; a SavedState is
// restored at most once.
func (st *SavedState) Restore(s *Sequence) error {
	m := s.m
	h := &st.hdr
	kvio, ok := m.backend.(KVStateIO)
	if !ok {
		return fmt.Errorf("%w (%s)", ErrStateUnsupported, m.backend.Name())
	}
	if st.r == nil {
		return errors.New("a saved state is restored once")
	}
	r := st.r
	st.r = nil
	if want := kvio.KVStateBytes(h.Tokens); want != h.KVBytes || h.Tokens > m.context {
		return fmt.Errorf("%w: %d bytes of KV cache for %d tokens, this model's take %d", ErrBadState, h.KVBytes, h.Tokens, want)
	}
	if h.StateFloats != m.rspec.Floats() {
		return fmt.Errorf("%w: a recurrent state of %d floats, this model's has %d", ErrBadState, h.StateFloats, m.rspec.Floats())
	}
	s.Reset()
	fail := func(err error) error {
		s.Reset()
		if !errors.Is(err, ErrBadState) && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			err = fmt.Errorf("%w: %w", ErrBadState, err)
		}
		return err
	}
	if err := kvio.LoadKV(r, h.Tokens); err != nil {
		return fail(fmt.Errorf("restoring the KV cache: %w", err))
	}
	var live []float32
	if h.Live {
		live = make([]float32, h.StateFloats)
		if err := readFloats(r, live); err != nil {
			return fail(err)
		}
	}
	snaps := make([]snapshot, len(h.Snapshots))
	for i, p := range h.Snapshots {
		snaps[i] = snapshot{pos: p, state: make([]float32, h.StateFloats)}
		if err := readFloats(r, snaps[i].state); err != nil {
			return fail(err)
		}
	}
	sum := st.crc.Sum32()
	var stored [4]byte
	if _, err := io.ReadFull(r, stored[:]); err != nil {
		return fail(err)
	}
	if got := binary.LittleEndian.Uint32(stored[:]); got != sum {
		return fail(fmt.Errorf("%w: checksum %08x, the contents sum to %08x", ErrBadState, got, sum))
	}
	if live != nil {
		if err := m.backend.WriteRecurrentState(live); err != nil {
			return fail(fmt.Errorf("restoring the recurrent state: %w", err))
		}
		m.statePos = h.Tokens
	}
	if k := len(snaps) - m.maxSnaps; k > 0 {
		snaps = snaps[k:] // the latest turn boundaries are the ones worth keeping
	}
	m.snaps = snaps
	s.tokens = append(s.tokens[:0], st.Tokens...)
	s.markPos, s.markState = 0, nil
	return nil
}

func writeFloats(w io.Writer, f []float32) error {
	var buf [4096]byte
	for len(f) > 0 {
		n := min(len(f), len(buf)/4)
		for i, v := range f[:n] {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		if _, err := w.Write(buf[:4*n]); err != nil {
			return err
		}
		f = f[n:]
	}
	return nil
}

func readFloats(r io.Reader, f []float32) error {
	var buf [4096]byte
	for len(f) > 0 {
		n := min(len(f), len(buf)/4)
		if _, err := io.ReadFull(r, buf[:4*n]); err != nil {
			return fmt.Errorf("%w: %w", ErrBadState, err)
		}
		for i := range f[:n] {
			f[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		f = f[n:]
	}
	return nil
}
