package hub

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// originSuffix names the file beside a partial download that says which
// version of which URL its bytes are (origin).
const originSuffix = ".origin"

// origin identifies what a partial file holds: the URL, and the validators
// the server gave for it (a strong ETag, Last-Modified) with the full size.
type origin struct {
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	Size         int64  `json:"size,omitempty"`
	// SHA256 is the hash the server announced for the file (Hugging
	// Face's X-Linked-Etag), checked when no hash is pinned.
	SHA256 string `json:"sha256,omitempty"`
}

func readOrigin(path string) (origin, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return origin{}, false
	}
	var o origin
	if json.Unmarshal(data, &o) != nil || o.URL == "" {
		return origin{}, false
	}
	return o, true
}

func writeOrigin(path string, o origin) error {
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// matches checks a resumed response against what the partial file holds,
// as far as the server says: a server that ignores If-Range still sends
// its ETag, Last-Modified and total size, and a difference in any means the
// rest belongs to another version of the file.
func (o origin) matches(resp *http.Response) bool {
	if e := strongETag(resp.Header.Get("ETag")); o.ETag != "" && e != "" && e != o.ETag {
		return false
	}
	if lm := resp.Header.Get("Last-Modified"); o.LastModified != "" && lm != "" && lm != o.LastModified {
		return false
	}
	if t := contentRangeTotal(resp.Header.Get("Content-Range")); o.Size > 0 && t > 0 && t != o.Size {
		return false
	}
	if h := announcedSHA256(resp); o.SHA256 != "" && h != "" && h != o.SHA256 {
		return false
	}
	return true
}

// strongETag returns etag unless it is weak (W/"..."), which If-Range may
// not use.
func strongETag(etag string) string {
	if strings.HasPrefix(etag, "W/") {
		return ""
	}
	return etag
}

// watchdog calls cancel when the server is too slow: the response headers,
// or min body bytes, have not come within d of the last time they did. A
// server that drips a byte every few seconds keeps no transfer alive.
type watchdog struct {
	d      time.Duration
	min    int64
	mu     sync.Mutex
	got    int64 // body bytes since the window began
	t      *time.Timer
	cancel func()
	done   atomic.Bool
}

func newWatchdog(d time.Duration, min int64, cancel func()) *watchdog {
	w := &watchdog{d: d, min: min, cancel: cancel}
	w.t = time.AfterFunc(d, func() {
		w.done.Store(true)
		w.cancel()
	})
	return w
}

// kick starts a new window: the request went out, or its headers came.
func (w *watchdog) kick() {
	if w == nil || w.done.Load() {
		return
	}
	w.mu.Lock()
	w.got = 0
	w.t.Reset(w.d)
	w.mu.Unlock()
}

// progress counts n body bytes; min of them start a new window.
func (w *watchdog) progress(n int) {
	if w == nil || w.done.Load() {
		return
	}
	w.mu.Lock()
	w.got += int64(n)
	if w.got >= w.min {
		w.got = 0
		w.t.Reset(w.d)
	}
	w.mu.Unlock()
}

func (w *watchdog) stop() {
	w.mu.Lock()
	w.t.Stop()
	w.mu.Unlock()
}

// fired reports whether the watchdog cancelled the request.
func (w *watchdog) fired() bool { return w != nil && w.done.Load() }

// isPermanentNetError reports failures that retrying at once cannot fix: a
// host name that does not resolve (offline, or a typo) or no network at
// all. A refused connection may be a server restarting, so it is retried.
func isPermanentNetError(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return !dns.IsTimeout
	}
	return errors.Is(err, syscall.ENETUNREACH)
}
