package hub

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
)

// FuzzDownload answers downloads with arbitrary statuses, headers and
// bodies, onto an arbitrary partial file. Whatever the server says, Download
// never panics or hangs, and the final name holds either nothing or a file
// that is a valid GGUF of the expected size.
func FuzzDownload(f *testing.F) {
	good := testModelBytes(f)
	f.Add(200, "", "", `"a"`, good, []byte(nil), int64(len(good)), false)
	f.Add(206, "bytes 100-1151/1152", "1052", `"a"`, good[100:], good[:100], int64(len(good)), true)
	f.Add(206, "bytes 0-9/10", "", "", []byte("0123456789"), []byte("xx"), int64(0), true)
	f.Add(416, "bytes */5", "", `W/"w"`, []byte(nil), []byte("GGUF\x03"), int64(5), true)
	f.Add(200, "", "99999", "", []byte("<html>not a model</html>"), []byte(nil), int64(0), false)
	f.Add(302, "", "", "", []byte(nil), []byte(nil), int64(0), false)
	f.Add(500, "", "", "", []byte("oops"), good[:10], int64(len(good)), true)

	var mu sync.Mutex
	var cur struct {
		status               int
		contentRange, length string
		etag                 string
		body                 []byte
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		c := cur
		mu.Unlock()
		if c.status == http.StatusFound {
			http.Redirect(w, r, r.URL.Path, http.StatusFound) // a loop
			return
		}
		if c.contentRange != "" {
			w.Header().Set("Content-Range", c.contentRange)
		}
		if c.length != "" {
			w.Header().Set("Content-Length", c.length)
		}
		if c.etag != "" {
			w.Header().Set("ETag", c.etag)
		}
		w.WriteHeader(c.status)
		w.Write(c.body)
	}))
	defer srv.Close()
	f.Fuzz(func(t *testing.T, status int, contentRange, length, etag string, body, partial []byte, size int64, withOrigin bool) {
		if status < 200 || status > 599 || len(body) > 1<<16 || len(partial) > 1<<16 || size < 0 || size > 1<<20 {
			return
		}
		mu.Lock()
		cur.status, cur.contentRange, cur.length, cur.etag, cur.body = status, contentRange, length, etag, body
		mu.Unlock()
		dir := t.TempDir()
		m := Model{Name: "m", File: "m.gguf", Source: srv.URL + "/m.gguf", Size: size}
		part := filepath.Join(dir, "m.gguf"+PartialSuffix)
		if partial != nil {
			os.WriteFile(part, partial, 0o644)
			if withOrigin {
				writeOrigin(part+originSuffix, origin{URL: m.URL(), ETag: `"a"`, Size: size})
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := Download(ctx, m, dir, Options{Retries: 1, StallTimeout: time.Second})
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Download hung: %v", err)
		}
		final := filepath.Join(dir, "m.gguf")
		st, serr := os.Stat(final)
		if err != nil {
			if serr == nil {
				t.Fatalf("failed (%v) but left a final file", err)
			}
			return
		}
		if serr != nil || st.Size() != res.Size || (size > 0 && res.Size != size) {
			t.Fatalf("result %+v, final file %v %v", res, st, serr)
		}
		g, gerr := gguf.Open(final)
		if gerr != nil {
			t.Fatalf("installed a file that is not GGUF: %v", gerr)
		}
		g.Close()
		if _, err := os.Stat(part); err == nil {
			t.Fatal("partial file left after success")
		}
	})
}
