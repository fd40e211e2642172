package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"golang.org/x/sys/unix"
)

// testModelBytes is a small valid GGUF file.
func testModelBytes(t testing.TB) []byte {
	t.Helper()
	w := gguf.NewWriter()
	w.Set("general.architecture", "qwen3")
	data := make([]byte, 18*64)
	for i := range data {
		data[i] = byte(i * 13)
	}
	for b := 0; b < len(data); b += 18 {
		data[b+1] &= 0x3f // a finite f16 scale in each block
	}
	if err := w.AddTensor("token_embd.weight", gguf.Q1_0, []int64{1024, 8}, data); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func hashOf(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// server serves content at /m.gguf. cutAt > 0 makes the first cuts
// responses drop the connection after cutAt bytes of body. ignoreRange
// answers every request with the whole file.
type server struct {
	*httptest.Server
	content     []byte
	cutAt       int
	cuts        int
	ignoreRange bool

	mu     sync.Mutex
	ranges []string // the Range header of each request
}

func newServer(t *testing.T, content []byte) *server {
	s := &server{content: content}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/m.gguf" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	cut := s.cuts > 0
	if cut {
		s.cuts--
	}
	s.mu.Unlock()
	if s.ignoreRange {
		r.Header.Del("Range")
	}
	if !cut {
		http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(s.content))
		return
	}
	// Announce the whole file, send part of it, then drop the connection.
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		start, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(s.content)-1, len(s.content)))
		w.Header().Set("Content-Length", strconv.Itoa(len(s.content)-start))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(s.content)))
	}
	w.Write(s.content[start:min(start+s.cutAt, len(s.content))])
	w.(http.Flusher).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func (s *server) requestRanges() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

func (s *server) model(content []byte) Model {
	return Model{Name: "m", File: "m.gguf", Source: s.URL + "/m.gguf", Size: int64(len(content)), SHA256: hashOf(content)}
}

// checkDir asserts the invariant: the final name holds the complete file
// or nothing, and says whether a partial file remains.
func checkDir(t *testing.T, dir string, content []byte, wantFinal, wantPartial bool) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, "m.gguf"))
	switch {
	case err == nil && !bytes.Equal(got, content):
		t.Errorf("final file holds %d bytes that differ from the %d-byte model", len(got), len(content))
	case err == nil && !wantFinal:
		t.Error("final file present")
	case err != nil && wantFinal:
		t.Errorf("final file: %v", err)
	}
	_, err = os.Stat(filepath.Join(dir, "m.gguf"+PartialSuffix))
	if (err == nil) != wantPartial {
		t.Errorf("partial file present = %v, want %v", err == nil, wantPartial)
	}
}

func TestDownload(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	dir := filepath.Join(t.TempDir(), "models") // created by Download
	var last Progress
	res, err := Download(context.Background(), s.model(content), dir, Options{Progress: func(p Progress) {
		if p.Phase == PhaseDownload {
			last = p
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, content, true, false)
	if res.SHA256 != hashOf(content) || res.Size != int64(len(content)) || res.AlreadyPresent {
		t.Errorf("result %+v", res)
	}
	if last.Done != int64(len(content)) || last.Total != int64(len(content)) {
		t.Errorf("last progress %+v", last)
	}
	res, err = Download(context.Background(), s.model(content), dir, Options{})
	if err != nil || !res.AlreadyPresent {
		t.Errorf("second download: %+v %v", res, err)
	}
	if n := len(s.requestRanges()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestResumeAfterCut(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	s.cutAt, s.cuts = 700, 1
	dir := t.TempDir()
	_, err := Download(context.Background(), s.model(content), dir, Options{})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("cut download: %v", err)
	}
	checkDir(t, dir, content, false, true)
	if st, _ := os.Stat(filepath.Join(dir, "m.gguf"+PartialSuffix)); st.Size() != 700 {
		t.Errorf("partial holds %d bytes, want 700", st.Size())
	}
	var resumed int64
	if _, err := Download(context.Background(), s.model(content), dir, Options{Progress: func(p Progress) {
		if p.Phase == PhaseDownload {
			resumed = p.Resumed
		}
	}}); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, content, true, false)
	if r := s.requestRanges(); len(r) != 2 || r[1] != "bytes=700-" || resumed != 700 {
		t.Errorf("requests %q, resumed %d", r, resumed)
	}
}

func TestAutomaticRetries(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	s.cutAt, s.cuts = 500, 2
	dir := t.TempDir()
	retried := 0
	if _, err := Download(context.Background(), s.model(content), dir, Options{Retries: 3, Retried: func(error) { retried++ }}); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, content, true, false)
	if r := s.requestRanges(); retried != 2 || len(r) != 3 || r[1] != "bytes=500-" || r[2] != "bytes=1000-" {
		t.Errorf("retried %d, requests %q", retried, r)
	}
}

func TestServerIgnoresRange(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	s.ignoreRange = true
	dir := t.TempDir()
	// A partial file whose bytes are wrong: only a restart gives the right
	// file. Its origin says it is this URL's, so that resuming is tried.
	os.WriteFile(filepath.Join(dir, "m.gguf"+PartialSuffix), bytes.Repeat([]byte{0xEE}, 300), 0o644)
	writeOrigin(filepath.Join(dir, "m.gguf"+PartialSuffix+originSuffix), origin{URL: s.model(content).URL()})
	if _, err := Download(context.Background(), s.model(content), dir, Options{}); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, content, true, false)
	if r := s.requestRanges(); len(r) != 1 || r[0] != "bytes=300-" {
		t.Errorf("requests %q", r)
	}
}

func TestCompletePartialOfUnknownSize(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "m.gguf"+PartialSuffix), content, 0o644)
	m := s.model(content)
	m.Size, m.SHA256 = 0, ""
	if _, err := Download(context.Background(), m, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, content, true, false)
}

func TestPartialLongerThanModel(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "m.gguf"+PartialSuffix), make([]byte, len(content)+5), 0o644)
	if _, err := Download(context.Background(), s.model(content), dir, Options{}); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, content, true, false)
	if r := s.requestRanges(); len(r) != 1 || r[0] != "" {
		t.Errorf("requests %q", r)
	}
}

func TestRejectedDownloads(t *testing.T) {
	content := testModelBytes(t)
	corrupt := bytes.Clone(content)
	corrupt[len(corrupt)-1] ^= 1
	html := []byte("<!doctype html><title>Sign in</title>")
	cases := []struct {
		name        string
		serve       []byte
		model       func(Model) Model
		want        error
		keepPartial bool
	}{
		{"sha256 mismatch", corrupt, nil, ErrChecksum, false},
		{"server size differs", content, func(m Model) Model { m.Size += 10; return m }, ErrSizeMismatch, false},
		{"not gguf", html, func(m Model) Model { m.Size, m.SHA256 = 0, ""; return m }, ErrNotGGUF, false},
		{"truncated gguf of unknown size", content[:len(content)-100], func(m Model) Model { m.Size, m.SHA256 = 0, ""; return m }, ErrNotGGUF, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, c.serve)
			m := s.model(content)
			if c.model != nil {
				m = c.model(m)
			}
			dir := t.TempDir()
			_, err := Download(context.Background(), m, dir, Options{})
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			checkDir(t, dir, content, false, c.keepPartial)
		})
	}
}

func TestHTTPErrors(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	m := s.model(content)
	m.Source = s.URL + "/missing.gguf"
	m.File = "missing.gguf"
	dir := t.TempDir()
	_, err := Download(context.Background(), m, dir, Options{Retries: 2})
	if !errors.Is(err, ErrHTTP) || errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
	m.Source = "http://127.0.0.1:1/m.gguf" // nothing listens on port 1
	if _, err := Download(context.Background(), m, dir, Options{}); !errors.Is(err, ErrInterrupted) {
		t.Errorf("refused: %v", err)
	}
}

// failingWriter stands in for a disk that fills up after limit bytes.
type failingWriter struct {
	w     io.Writer
	limit int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.limit {
		n, _ := f.w.Write(p[:f.limit])
		f.limit = 0
		return n, &os.PathError{Op: "write", Path: "m.gguf.partial", Err: syscall.ENOSPC}
	}
	f.limit -= len(p)
	return f.w.Write(p)
}

func TestDiskFull(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	dir := t.TempDir()
	opts := Options{Retries: 3, wrapWriter: func(w io.Writer) io.Writer { return &failingWriter{w: w, limit: 400} }}
	_, err := Download(context.Background(), s.model(content), dir, opts)
	if !errors.Is(err, ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("full disk: %v", err)
	}
	checkDir(t, dir, content, false, true)
	if n := len(s.requestRanges()); n != 1 {
		t.Errorf("a full disk was retried: %d requests", n)
	}
	// Space freed: the pull resumes.
	if _, err := Download(context.Background(), s.model(content), dir, Options{}); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, content, true, false)

	// Too little free space is reported before anything is written.
	dir = t.TempDir()
	opts = Options{freeSpace: func(string) (int64, error) { return 100, nil }}
	if _, err := Download(context.Background(), s.model(content), dir, opts); !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "free") {
		t.Fatalf("no space: %v", err)
	}
}

func TestUnwritableDirectory(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Download(context.Background(), s.model(content), filepath.Join(file, "models"), Options{}); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("directory under a file: %v", err)
	}
	if os.Geteuid() == 0 {
		t.Log("running as root: permission bits do not stop writes; skipping the read-only directory case")
		return
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o555)
	defer os.Chmod(dir, 0o755)
	if _, err := Download(context.Background(), s.model(content), dir, Options{}); !errors.Is(err, os.ErrPermission) {
		t.Errorf("read-only directory: %v", err)
	}
}

func TestCancel(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	_, err := Download(ctx, s.model(content), dir, Options{Retries: 5, Progress: func(p Progress) {
		cancel()
	}})
	if err == nil {
		t.Fatal("cancelled download succeeded")
	}
	_, statErr := os.Stat(filepath.Join(dir, "m.gguf"))
	if statErr == nil {
		t.Error("final file after cancel")
	}
}

func TestPull(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	dir := t.TempDir()
	res, err := Pull(context.Background(), s.URL+"/m.gguf", dir, Options{SHA256: hashOf(content)})
	if err != nil || res.Path != filepath.Join(dir, "m.gguf") {
		t.Fatalf("pull URL: %+v %v", res, err)
	}
	if _, err := Pull(context.Background(), s.URL+"/m.gguf", t.TempDir(), Options{SHA256: strings.Repeat("0", 64)}); !errors.Is(err, ErrChecksum) {
		t.Errorf("pinned wrong sha: %v", err)
	}
	for _, bad := range []string{"bonsai-9b", "ftp://x/m.gguf", "https://x/model.bin", "https://x/"} {
		if _, err := Pull(context.Background(), bad, dir, Options{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := Pull(context.Background(), "bonsai-9b", dir, Options{}); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("unknown name: %v", err)
	}
}

func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Registry {
		if seen[m.Name] || m.Name != strings.ToLower(m.Name) || checkFileName(m.File) != nil || !strings.HasSuffix(m.File, ".gguf") {
			t.Errorf("bad entry %+v", m)
		}
		seen[m.Name] = true
		if !strings.HasPrefix(m.URL(), "https://huggingface.co/"+m.Repo+"/resolve/main/") ||
			strings.Contains(m.Name, "bonsai") != strings.HasPrefix(m.Repo, "prism-ml/") {
			t.Errorf("%s: URL %s", m.Name, m.URL())
		}
	}
	m, ok := Lookup("Bonsai-8B")
	if !ok || m.URL() != "https://huggingface.co/prism-ml/Bonsai-8B-gguf/resolve/main/Bonsai-8B-Q1_0.gguf" || m.Size != 1_158_654_496 {
		t.Errorf("bonsai-8b: %+v", m)
	}
	if _, ok := Lookup(DefaultModel); !ok {
		t.Error("default model not in the registry")
	}
	for _, m := range Registry {
		if m.Arch() == "" || len(m.Types()) == 0 {
			t.Errorf("%s: no published architecture and types", m.Name)
		}
	}
	// The 27B family as published: Bonsai
	// 27B's Q1_0 and Ternary Bonsai 27B's Q2_0 g64 to the byte, Bonsai 2's
	// two packings in one repository, PQ2_0 its default download.
	for _, c := range []struct {
		name, url string
		size      int64
		weights   gguf.Type
	}{
		{"bonsai-27b", "https://huggingface.co/prism-ml/Bonsai-27B-gguf/resolve/main/Bonsai-27B-Q1_0.gguf", 3_803_452_480, gguf.Q1_0},
		{"ternary-bonsai-27b", "https://huggingface.co/prism-ml/Ternary-Bonsai-27B-gguf/resolve/main/Ternary-Bonsai-27B-Q2_g64.gguf", 7_585_330_240, gguf.Q2_0},
		{"bonsai-2-27b", "https://huggingface.co/prism-ml/Ternary-Bonsai-2-27B-gguf/resolve/main/Ternary-Bonsai-2-27B-PQ2_0.gguf", 0, gguf.PQ2_0},
		{"bonsai-2-27b-ptq1_0", "https://huggingface.co/prism-ml/Ternary-Bonsai-2-27B-gguf/resolve/main/Ternary-Bonsai-2-27B-PTQ1_0.gguf", 0, gguf.PTQ1_0},
	} {
		m, ok := Lookup(c.name)
		if !ok || m.URL() != c.url || m.Size != c.size || m.Arch() != "qwen35" || m.Types()[0] != c.weights {
			t.Errorf("%s: %+v (%s %v), want %s, %d bytes, qwen35 in %s", c.name, m, m.Arch(), m.Types(), c.url, c.size, c.weights)
		}
	}
}

func TestResolveAndList(t *testing.T) {
	dir := t.TempDir()
	m, _ := Lookup("bonsai-4b")
	if _, err := Resolve("bonsai-4b", dir); !errors.Is(err, ErrNotDownloaded) || !strings.Contains(err.Error(), "bonsai pull bonsai-4b") {
		t.Errorf("not downloaded: %v", err)
	}
	os.WriteFile(filepath.Join(dir, m.File), []byte("GGUF"), 0o644)
	os.WriteFile(filepath.Join(dir, "own.gguf"), []byte("GGUF"), 0o644)
	os.WriteFile(filepath.Join(dir, "Bonsai-8B-Q1_0.gguf"+PartialSuffix), []byte("GG"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644)
	elsewhere := filepath.Join(t.TempDir(), "x.gguf")
	os.WriteFile(elsewhere, nil, 0o644)
	cases := []struct {
		arg, want string
		err       error
	}{
		{"bonsai-4b", filepath.Join(dir, m.File), nil},
		{"BONSAI-4B", filepath.Join(dir, m.File), nil},
		{"own", filepath.Join(dir, "own.gguf"), nil},
		{"own.gguf", filepath.Join(dir, "own.gguf"), nil},
		{elsewhere, elsewhere, nil},
		{"bonsai-8b", "", ErrNotDownloaded},
		{"nonesuch", "", ErrUnknownModel},
		{"../own", "", os.ErrNotExist},
		{"/no/such/model.gguf", "", os.ErrNotExist},
		{"", "", ErrUnknownModel},
	}
	for _, c := range cases {
		got, err := Resolve(c.arg, dir)
		if got != c.want || (c.err == nil) != (err == nil) || (c.err != nil && !errors.Is(err, c.err)) {
			t.Errorf("Resolve(%q) = %q, %v; want %q, %v", c.arg, got, err, c.want, c.err)
		}
	}
	if _, err := Resolve(dir, dir); err == nil {
		t.Error("a directory resolved")
	}
	list, err := List(dir)
	if err != nil || len(list) != 3 {
		t.Fatalf("List = %d entries, %v", len(list), err)
	}
	if list[0].Model == nil || list[0].Model.Name != "bonsai-4b" || list[1].Model == nil || !list[1].Partial || list[2].Model != nil {
		t.Errorf("List: %+v", list)
	}
	if l, err := List(filepath.Join(dir, "absent")); err != nil || l != nil {
		t.Errorf("absent dir: %v %v", l, err)
	}
}

func TestConcurrentPullRefused(t *testing.T) {
	content := testModelBytes(t)
	s := newServer(t, content)
	dir := t.TempDir()
	partial := filepath.Join(dir, "m.gguf"+PartialSuffix)
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(content[:100])
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := Download(context.Background(), s.model(content), dir, Options{}); !errors.Is(err, ErrBusy) {
		t.Errorf("second pull: %v", err)
	}
	f.Close() // releases the lock
	if _, err := Download(context.Background(), s.model(content), dir, Options{}); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, content, true, false)
}

// A FIFO or device named as the model is refused by name, before anything
// opens it (opening a FIFO blocks until a writer comes).
func TestResolveRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, p := range []string{fifo, dir, "/dev/zero"} {
		if _, err := Resolve(p, dir); !errors.Is(err, ErrNotModelFile) {
			t.Errorf("Resolve(%s) = %v, want ErrNotModelFile", p, err)
		}
	}
}

// A registry entry's pinned SHA256 is checked on download: other bytes are
// refused with both hashes named, nothing appears under the file's name,
// and the models directory's other files stay as they were.
func TestPinnedRegistryHash(t *testing.T) {
	content := testModelBytes(t)
	corrupt := bytes.Clone(content)
	corrupt[len(corrupt)/2] ^= 1
	s := newServer(t, corrupt)
	pinned := Model{Name: "pinned-test", File: "m.gguf", Source: s.URL + "/m.gguf", Size: int64(len(content)), SHA256: hashOf(content)}
	saved := Registry
	Registry = append(append([]Model(nil), saved...), pinned)
	t.Cleanup(func() { Registry = saved })

	dir := t.TempDir()
	other := filepath.Join(dir, "older.gguf")
	if err := os.WriteFile(other, content, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Pull(context.Background(), "pinned-test", dir, Options{})
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), hashOf(content)) || !strings.Contains(err.Error(), hashOf(corrupt)) ||
		!strings.Contains(err.Error(), "nothing under that name was written") {
		t.Fatalf("mismatch: %v", err)
	}
	checkDir(t, dir, content, false, false)
	if got, err := os.ReadFile(other); err != nil || !bytes.Equal(got, content) {
		t.Errorf("the other model file changed: %v", err)
	}
	if c := pinned.Check(); c != "sha256 pinned" {
		t.Errorf("pinned entry says %q", c)
	}
	for _, m := range saved {
		if m.SHA256 == "" && !strings.HasPrefix(m.Check(), "no sha256") {
			t.Errorf("%s has no hash but says %q", m.Name, m.Check())
		}
	}
}

// TestAnnouncedHash: without a pinned hash, the SHA256 a Hugging Face-like
// server announces on its redirect (X-Linked-Etag) is checked, so bytes
// spoiled on the way (here: served corrupt by the CDN) are refused, and a
// download that matches says it was verified against the server's hash.
func TestAnnouncedHash(t *testing.T) {
	content := testModelBytes(t)
	corrupt := bytes.Clone(content)
	corrupt[len(corrupt)/2] ^= 1
	for _, c := range []struct {
		name     string
		served   []byte
		announce string
		wantErr  error
	}{
		{"matches", content, `"` + hashOf(content) + `"`, nil},
		{"weak etag, upper case", content, `W/"` + strings.ToUpper(hashOf(content)) + `"`, nil},
		{"corrupt", corrupt, `"` + hashOf(content) + `"`, ErrChecksum},
		{"not a sha256 (a git blob id)", content, `"` + hashOf(content)[:40] + `"`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cdn := newServer(t, c.served)
			hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Linked-Etag", c.announce)
				w.Header().Set("X-Linked-Size", strconv.Itoa(len(content)))
				http.Redirect(w, r, cdn.URL+"/m.gguf", http.StatusFound)
			}))
			t.Cleanup(hub.Close)
			dir := t.TempDir()
			res, err := Download(context.Background(), Model{Name: "m", File: "m.gguf", Source: hub.URL + "/resolve/main/m.gguf"}, dir, Options{})
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			if c.wantErr != nil {
				if !strings.Contains(err.Error(), "the server announced") {
					t.Errorf("message %q does not say whose hash", err)
				}
				checkDir(t, dir, content, false, false)
				return
			}
			checkDir(t, dir, content, true, false)
			sha := len(strings.Trim(strings.TrimPrefix(c.announce, "W/"), `"`)) == 64
			if res.Verified != sha || res.Announced != sha {
				t.Errorf("result %+v: want verified and announced = %v", res, sha)
			}
		})
	}
}
