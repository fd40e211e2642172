package hub

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
)

// versioned serves one version of /m.gguf at a time, with its ETag, through
// http.ServeContent (which honours Range and If-Range). stall makes the
// next responses send stallAfter bytes of body (or, when negative, no
// headers at all) and then nothing until the client gives up.
type versioned struct {
	*httptest.Server
	mu         sync.Mutex
	content    []byte
	etag       string
	ignoreIf   bool // honour Range but ignore If-Range
	stalls     int
	stallAfter int
	ranges     []string
	ifRanges   []string
}

func newVersioned(t *testing.T, content []byte, etag string) *versioned {
	v := &versioned{content: content, etag: etag}
	v.Server = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.Close)
	return v
}

func (v *versioned) set(content []byte, etag string) {
	v.mu.Lock()
	v.content, v.etag = content, etag
	v.mu.Unlock()
}

func (v *versioned) serve(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	v.ranges = append(v.ranges, r.Header.Get("Range"))
	v.ifRanges = append(v.ifRanges, r.Header.Get("If-Range"))
	content, etag, stall, after := v.content, v.etag, v.stalls > 0, v.stallAfter
	if stall {
		v.stalls--
	}
	v.mu.Unlock()
	if v.ignoreIf {
		r.Header.Del("If-Range")
	}
	if !stall {
		w.Header().Set("ETag", etag)
		http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(content))
		return
	}
	if after >= 0 {
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Length", strconv.Itoa(len(content)))
		w.Write(content[:after])
		w.(http.Flusher).Flush()
	}
	<-r.Context().Done() // the stall: nothing more until the client leaves
}

func (v *versioned) log() (ranges, ifRanges []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.ranges), slices.Clone(v.ifRanges)
}

func (v *versioned) model(content []byte) Model {
	return Model{Name: "m", File: "m.gguf", Source: v.URL + "/m.gguf", Size: int64(len(content))}
}

// A server that accepts the connection and never answers is an error after
// the stall timeout, not a hang.
func TestStallBeforeHeaders(t *testing.T) {
	content := testModelBytes(t)
	v := newVersioned(t, content, `"a"`)
	v.stalls, v.stallAfter = 1, -1
	dir := t.TempDir()
	start := time.Now()
	_, err := Download(context.Background(), v.model(content), dir, Options{StallTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrStalled) || !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrStalled and ErrInterrupted", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("gave up after %v", d)
	}
	checkDir(t, dir, content, false, false) // no empty partial left behind
}

// A server that stops mid-body is an error after the stall timeout, and the
// retry resumes from the bytes already on disk.
func TestStallMidBodyResumes(t *testing.T) {
	content := testModelBytes(t)
	v := newVersioned(t, content, `"a"`)
	v.stalls, v.stallAfter = 1, 500
	dir := t.TempDir()
	var retried []error
	_, err := Download(context.Background(), v.model(content), dir, Options{
		StallTimeout: 200 * time.Millisecond, Retries: 2, Retried: func(err error) { retried = append(retried, err) }})
	if err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, content, true, false)
	ranges, ifRanges := v.log()
	if !slices.Equal(ranges, []string{"", "bytes=500-"}) || ifRanges[1] != `"a"` {
		t.Errorf("requests: ranges %q, If-Range %q", ranges, ifRanges)
	}
	if len(retried) != 1 || !errors.Is(retried[0], ErrStalled) {
		t.Errorf("retries %v", retried)
	}
}

// A partial file of one version is never completed with another's bytes:
// the resume asks If-Range with the first version's ETag, and the server
// (whose file changed) sends the whole new file.
func TestResumeOfAChangedFileRestarts(t *testing.T) {
	for _, ignoreIf := range []bool{false, true} {
		name := "server honours If-Range"
		if ignoreIf {
			name = "server ignores If-Range"
		}
		t.Run(name, func(t *testing.T) {
			a := testModelBytes(t)
			b := bytes.Clone(a)
			b[len(b)-1] ^= 0xff // same size and header: only the bytes differ
			v := newVersioned(t, a, `"a"`)
			v.ignoreIf = ignoreIf
			v.stalls, v.stallAfter = 1, 700
			dir := t.TempDir()
			m := v.model(a)
			if _, err := Download(context.Background(), m, dir, Options{StallTimeout: 100 * time.Millisecond}); !errors.Is(err, ErrInterrupted) {
				t.Fatalf("first try: %v", err)
			}
			v.set(b, `"b"`)
			if _, err := Download(context.Background(), m, dir, Options{}); err != nil {
				t.Fatal(err)
			}
			checkDir(t, dir, b, true, false)
			if _, ifRanges := v.log(); ifRanges[1] != `"a"` {
				t.Errorf("If-Range %q", ifRanges)
			}
		})
	}
}

// A partial file nothing says came from this URL (left by another file of
// the same name) is not resumed.
func TestPartialOfUnknownOriginIsNotResumed(t *testing.T) {
	content := testModelBytes(t)
	v := newVersioned(t, content, `"a"`)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "m.gguf"+PartialSuffix), content[:600], 0o644)
	m := v.model(content)
	m.Source = v.URL + "/m.gguf?other"
	writeOrigin(filepath.Join(dir, "m.gguf"+PartialSuffix+originSuffix), origin{URL: v.URL + "/m.gguf?v=old"})
	if _, err := Download(context.Background(), m, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, content, true, false)
	if ranges, _ := v.log(); !slices.Equal(ranges, []string{""}) {
		t.Errorf("ranges %q, want one request from the start", ranges)
	}
	if _, err := os.Stat(filepath.Join(dir, "m.gguf"+PartialSuffix+originSuffix)); !os.IsNotExist(err) {
		t.Errorf("origin file left behind: %v", err)
	}
}

// A redirect loop and a host that does not resolve are errors at once, not
// "download interrupted" retried five times.
func TestPermanentFailuresAreNotRetried(t *testing.T) {
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
	}))
	defer loop.Close()
	offline := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.DNSError{Err: "no such host", Name: "huggingface.co", IsNotFound: true}
	}}}
	for _, tc := range []struct {
		name   string
		source string
		client *http.Client
		want   error
	}{
		{"redirect loop", loop.URL + "/m.gguf", nil, ErrRedirectLoop},
		{"offline", "http://huggingface.co/m.gguf", offline, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			retries := 0
			_, err := Download(context.Background(), Model{Name: "m", File: "m.gguf", Source: tc.source}, t.TempDir(),
				Options{Client: tc.client, Retries: 5, Retried: func(error) { retries++ }})
			if err == nil || errors.Is(err, ErrInterrupted) || retries != 0 {
				t.Errorf("err = %v after %d retries, want a permanent error", err, retries)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// A server that drips a byte at a time stalls the transfer: what counts is
// a minimum rate over the stall timeout, not a byte now and then.
func TestDripIsAStall(t *testing.T) {
	quit := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		for {
			w.Write([]byte{'G'})
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	defer hs.Close()
	defer close(quit)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := Download(ctx, Model{Name: "m", File: "m.gguf", Source: hs.URL + "/m.gguf"}, t.TempDir(),
			Options{StallTimeout: 300 * time.Millisecond, MinRate: 10000})
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrStalled) {
			t.Errorf("err = %v, want ErrStalled", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a dripping server kept the download going")
	}
}

// A server that accepts and never answers is tried twice, not once per
// retry: the pull fails in about two stall timeouts.
func TestSilentServerIsNotRetriedEachTime(t *testing.T) {
	content := testModelBytes(t)
	v := newVersioned(t, content, `"a"`)
	v.stalls, v.stallAfter = 100, -1
	var retried int
	_, err := Download(context.Background(), v.model(content), t.TempDir(),
		Options{StallTimeout: 100 * time.Millisecond, Retries: 5, Retried: func(error) { retried++ }})
	if !errors.Is(err, ErrStalled) {
		t.Errorf("err = %v, want ErrStalled", err)
	}
	if ranges, _ := v.log(); len(ranges) != 2 || retried != 1 {
		t.Errorf("%d requests, %d retries; want 2 and 1", len(ranges), retried)
	}
}

// A resume the server answers from another file under the same ETag (and
// size) passes every header check; without a SHA256 the tensor data is
// checked end to end, which the joined bytes fail: the download is removed
// and the error says what may have happened.
func TestResumeSplicedFromAnotherFileIsCaught(t *testing.T) {
	a := testModelBytes(t)
	g, err := gguf.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	cut := int(g.DataOffset) + 100 // inside the tensor data
	b := bytes.Clone(a)
	for i := cut; i < len(b); i++ {
		b[i] = 0xff // another file's data, not laid out as this one's
	}
	v := newVersioned(t, a, `"a"`)
	v.stalls, v.stallAfter = 1, cut
	dir := t.TempDir()
	m := v.model(a)
	if _, err := Download(context.Background(), m, dir, Options{StallTimeout: 100 * time.Millisecond}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("first try: %v", err)
	}
	v.set(b, `"a"`)
	_, err = Download(context.Background(), m, dir, Options{})
	if !errors.Is(err, ErrNotGGUF) || !strings.Contains(err.Error(), "another version") {
		t.Errorf("err = %v, want ErrNotGGUF saying a resume may have joined another version", err)
	}
	checkDir(t, dir, a, false, false)
	if ranges, _ := v.log(); len(ranges) != 2 || ranges[1] == "" {
		t.Errorf("requests %q, want a resume", ranges)
	}
}

// Result.Verified says whether a hash vouched for the file.
func TestVerifiedOnlyByHash(t *testing.T) {
	content := testModelBytes(t)
	v := newVersioned(t, content, `"a"`)
	for _, sum := range []string{"", hashOf(content)} {
		m := v.model(content)
		m.SHA256 = sum
		res, err := Download(context.Background(), m, t.TempDir(), Options{})
		if err != nil || res.Verified != (sum != "") {
			t.Errorf("sha256 %q: verified %v, err %v", sum, res.Verified, err)
		}
	}
}
