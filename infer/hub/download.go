package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
)

// PartialSuffix marks a download in progress, beside its final name.
const PartialSuffix = ".partial"

// Phase says what a Progress report is about.
type Phase string

const (
	PhaseDownload Phase = "download"
	PhaseVerify   Phase = "verify"
)

// Progress is reported during a pull.
type Progress struct {
	Phase   Phase
	Done    int64 // bytes downloaded (or hashed) so far, resumed bytes included
	Total   int64 // expected bytes; 0 when unknown
	Resumed int64 // bytes already on disk when this transfer began
}

// Options tune Download and Pull. The zero value works.
type Options struct {
	Client   *http.Client    // nil: a client without an overall timeout
	Progress func(Progress)  // called from the downloading goroutine
	Retries  int             // automatic resumptions after a cut connection
	Retried  func(err error) // told about each automatic retry, if set
	SHA256   string          // expected hash for a URL pull (registry entries carry their own)
	// StallTimeout is how long the server may take to send the response
	// headers, and then each MinRate×StallTimeout bytes of the body,
	// before the transfer counts as interrupted (and is resumed, within
	// Retries). 0: 30s.
	StallTimeout time.Duration
	// MinRate is the slowest body transfer, in bytes a second, averaged
	// over StallTimeout, that is not a stall. 0: 1 KiB/s.
	MinRate int64

	// Test hooks: wrap the partial file's writer (to simulate a full disk)
	// and report free space.
	wrapWriter func(io.Writer) io.Writer
	freeSpace  func(dir string) (int64, error)
}

// Result describes a finished pull.
type Result struct {
	Path   string
	Size   int64
	SHA256 string // of the file, when it was downloaded now
	// Verified: the download's SHA256 matched a known one: pinned (the
	// registry's or --sha256), or else announced by the server. Without
	// one, only its size (when known) and GGUF structure, tensor data
	// included, were checked.
	Verified bool
	// Announced: the hash checked was the server's own (Hugging Face's
	// X-Linked-Etag), not a pinned one: it catches a corrupt or spliced
	// transfer, not a server that serves other bytes than it should.
	Announced      bool
	AlreadyPresent bool // the file was there already; nothing downloaded
}

// Pull downloads a registry model by name, or any GGUF file by http(s) URL,
// into dir.
func Pull(ctx context.Context, nameOrURL, dir string, opts Options) (Result, error) {
	if m, ok := Lookup(nameOrURL); ok {
		if opts.SHA256 != "" {
			m.SHA256 = opts.SHA256
		}
		return Download(ctx, m, dir, opts)
	}
	u, err := url.Parse(nameOrURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Result{}, unknownModel(nameOrURL)
	}
	file := path.Base(u.Path)
	if !strings.HasSuffix(strings.ToLower(file), ".gguf") {
		return Result{}, fmt.Errorf("URL %s does not name a .gguf file", nameOrURL)
	}
	return Download(ctx, Model{Name: strings.TrimSuffix(file, path.Ext(file)), File: file, Source: nameOrURL, SHA256: opts.SHA256}, dir, opts)
}

// Download fetches m into dir/m.File. Bytes go to dir/m.File+".partial",
// which survives interruptions and is resumed with an HTTP Range request
// (restarting when the server ignores Range). The finished file is checked
// (size, SHA256 when known, GGUF structure) and only then renamed to its
// final name, so a file under that name is always complete.
func Download(ctx context.Context, m Model, dir string, opts Options) (Result, error) {
	if err := checkFileName(m.File); err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("cannot create the models directory %s: %w", dir, fsProblem(err))
	}
	final := filepath.Join(dir, m.File)
	if st, err := os.Stat(final); err == nil {
		if m.Size > 0 && st.Size() != m.Size {
			return Result{}, fmt.Errorf("%s exists with %d bytes, expected %d; delete it to download again: %w", final, st.Size(), m.Size, ErrSizeMismatch)
		}
		return Result{Path: final, Size: st.Size(), AlreadyPresent: true}, nil
	}
	d := downloader{m: m, dir: dir, partial: final + PartialSuffix, opts: opts}
	if d.opts.Client == nil {
		d.opts.Client = &http.Client{}
	}
	if d.opts.Client.CheckRedirect == nil {
		// The same limit as net/http's, with an error that says what
		// happened rather than one that looks like a cut connection.
		c := *d.opts.Client
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("%w: %d redirects, the last to %s", ErrRedirectLoop, len(via), req.URL)
			}
			return nil
		}
		d.opts.Client = &c
	}
	if d.opts.StallTimeout <= 0 {
		d.opts.StallTimeout = defaultStallTimeout
	}
	if d.opts.freeSpace == nil {
		d.opts.freeSpace = freeSpace
	}
	if d.opts.MinRate <= 0 {
		d.opts.MinRate = defaultMinRate
	}
	idle := 0 // stalled attempts in a row that made no progress
	for attempt := 0; ; attempt++ {
		d.got = 0
		err := d.transfer(ctx)
		if err == nil {
			break
		}
		// A connection that brought data is worth resuming; one that
		// stalled having brought next to nothing is tried once more (a
		// blip), then pull gives up rather than wait out every retry's
		// stall timeout. Quick failures (a cut, a refused connection)
		// cost little and are retried as before.
		if errors.Is(err, ErrStalled) && d.got < d.windowBytes() {
			idle++
		} else {
			idle = 0
		}
		if !errors.Is(err, ErrInterrupted) || attempt >= opts.Retries || idle > maxIdleRetries || ctx.Err() != nil {
			return Result{}, err
		}
		if opts.Retried != nil {
			opts.Retried(err)
		}
		select {
		case <-ctx.Done():
			return Result{}, err
		case <-time.After(retryDelay(attempt)):
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("download of %s stopped: %w", m.File, err)
	}
	sum, size, announced, err := d.verify()
	if err != nil {
		return Result{}, err
	}
	if err := os.Rename(d.partial, final); err != nil {
		return Result{}, fmt.Errorf("cannot move the finished download to %s: %w", final, fsProblem(err))
	}
	os.Remove(d.partial + originSuffix)
	syncDir(dir)
	return Result{Path: final, Size: size, SHA256: sum, Verified: m.SHA256 != "" || announced, Announced: m.SHA256 == "" && announced}, nil
}

// Defaults of Options.StallTimeout and MinRate: a server that sends less
// than 30 KiB in 30 s has stalled.
const (
	defaultStallTimeout = 30 * time.Second
	defaultMinRate      = 1 << 10
)

// maxIdleRetries is how many times in a row a connection that stalled
// without data is retried: with the stall timeout, a server that accepts
// and sends nothing (or drips) fails the pull in about a minute.
const maxIdleRetries = 1

// windowBytes is what the body must bring within each stall timeout.
func (d *downloader) windowBytes() int64 {
	return max(1, int64(float64(d.opts.MinRate)*d.opts.StallTimeout.Seconds()))
}

// maxRedirects is how many redirects a request may follow.
const maxRedirects = 10

func retryDelay(attempt int) time.Duration {
	return min(time.Duration(attempt+1)*500*time.Millisecond, 5*time.Second)
}

// checkFileName refuses names that would escape the models directory.
func checkFileName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || filepath.Base(name) != name {
		return fmt.Errorf("bad model file name %q: it must be a plain file name", name)
	}
	return nil
}

type downloader struct {
	m       Model
	dir     string
	partial string
	opts    Options
	watch   *watchdog // the transfer under way's
	got     int64     // body bytes the transfer under way received
}

// stallError turns the error of a request the watchdog cancelled into one
// that says so (and is retried, resuming); other errors pass unchanged.
func (d *downloader) stallError(err error, done int64) error {
	if !d.watch.fired() {
		return err
	}
	if done > 0 {
		return fmt.Errorf("%s: less than %s in %v after %d bytes (run pull again to resume): %w: %w",
			d.m.URL(), humanBytes(d.windowBytes()), d.opts.StallTimeout, done, ErrStalled, ErrInterrupted)
	}
	return fmt.Errorf("%s: no response for %v: %w: %w", d.m.URL(), d.opts.StallTimeout, ErrStalled, ErrInterrupted)
}

func (d *downloader) report(p Progress) {
	if d.opts.Progress != nil {
		d.opts.Progress(p)
	}
}

// transfer brings the partial file up to the full size, resuming what is
// there. Errors worth retrying wrap ErrInterrupted.
func (d *downloader) transfer(ctx context.Context) error {
	f, err := os.OpenFile(d.partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cannot write to the models directory %s: %w", d.dir, fsProblem(err))
	}
	// Two pulls of one model would interleave their bytes; the lock goes
	// with the descriptor.
	if busy, err := lockFile(f); err != nil || busy {
		f.Close()
		if busy {
			return fmt.Errorf("%s: %w", d.partial, ErrBusy)
		}
		return fmt.Errorf("cannot lock %s: %w", d.partial, fsProblem(err))
	}
	defer func() {
		// An empty partial file records nothing worth resuming.
		if st, err := f.Stat(); err == nil && st.Size() == 0 {
			os.Remove(d.partial)
			os.Remove(d.partial + originSuffix)
		}
		f.Close()
	}()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", d.partial, fsProblem(err))
	}
	offset := st.Size()
	// Bytes are resumed only onto a partial file known to come from this
	// URL; If-Range then makes the server send the whole file instead of
	// the rest when its version changed, so two versions are never spliced.
	org, known := readOrigin(d.partial + originSuffix)
	if offset > 0 && (!known || org.URL != d.m.URL()) {
		offset = 0
	}
	if d.m.Size > 0 && offset > d.m.Size { // not ours to resume
		offset = 0
	}
	if d.m.Size > 0 && offset == d.m.Size {
		return nil // complete from an earlier run; verify decides
	}
	// The watchdog cancels the request when the server stalls.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.watch = newWatchdog(d.opts.StallTimeout, d.windowBytes(), cancel)
	defer d.watch.stop()
	resp, offset, err := d.request(rctx, offset, org)
	if err != nil {
		return d.stallError(err, 0)
	}
	defer resp.Body.Close()
	if offset == 0 && resp.StatusCode == http.StatusOK {
		org = origin{URL: d.m.URL(), ETag: strongETag(resp.Header.Get("ETag")), LastModified: resp.Header.Get("Last-Modified"),
			Size: announcedTotal(resp, 0), SHA256: announcedSHA256(resp)}
		if err := writeOrigin(d.partial+originSuffix, org); err != nil {
			return fmt.Errorf("cannot write to the models directory %s: %w", d.dir, fsProblem(err))
		}
	}
	if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
		return nil // the partial already holds the whole file
	}
	if err := f.Truncate(offset); err != nil {
		return fmt.Errorf("cannot write %s: %w", d.partial, fsProblem(err))
	}
	total := d.m.Size
	if announced := announcedTotal(resp, offset); announced > 0 {
		if total > 0 && announced != total {
			return fmt.Errorf("%s: the server offers %d bytes, expected %d: %w", d.m.URL(), announced, total, ErrSizeMismatch)
		}
		total = announced
	}
	if total > 0 {
		free, err := d.opts.freeSpace(d.dir)
		if err == nil && free < total-offset {
			return fmt.Errorf("%s needs %s more but %s holds only %s free: %w", d.m.File, humanBytes(total-offset), d.dir, humanBytes(free), ErrDiskFull)
		}
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Errorf("cannot write %s: %w", d.partial, fsProblem(err))
	}
	var w io.Writer = f
	if d.opts.wrapWriter != nil {
		w = d.opts.wrapWriter(w)
	}
	done, err := d.copy(rctx, w, resp.Body, offset, total)
	if serr := f.Sync(); err == nil && serr != nil {
		err = writeError(serr)
	}
	if err != nil {
		if ctx.Err() == nil {
			return d.stallError(err, done)
		}
		return err
	}
	if total > 0 && done < total {
		return fmt.Errorf("connection closed after %d of %d bytes (run pull again to resume): %w", done, total, ErrInterrupted)
	}
	return nil
}

// request asks for the bytes from offset on. It returns the offset the
// response actually starts at: 0 when the server ignored Range.
func (d *downloader) request(ctx context.Context, offset int64, org origin) (*http.Response, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.m.URL(), nil)
	if err != nil {
		return nil, 0, fmt.Errorf("bad URL %q: %w", d.m.URL(), err)
	}
	req.Header.Set("User-Agent", "bonsai")
	if offset > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
		switch {
		case org.ETag != "":
			req.Header.Set("If-Range", org.ETag)
		case org.LastModified != "":
			req.Header.Set("If-Range", org.LastModified)
		}
	}
	d.watch.kick()
	resp, err := d.opts.Client.Do(req)
	if err != nil {
		if errors.Is(err, ErrRedirectLoop) {
			return nil, 0, fmt.Errorf("%s: %w", d.m.URL(), errors.Unwrap(err.(*url.Error)))
		}
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("download stopped: %w", ctx.Err())
		}
		if isPermanentNetError(err) {
			return nil, 0, fmt.Errorf("%s: %w (are you offline?)", d.m.URL(), err)
		}
		return nil, 0, fmt.Errorf("%s: %w: %w", d.m.URL(), ErrInterrupted, err)
	}
	d.watch.kick()
	switch resp.StatusCode {
	case http.StatusOK:
		return resp, 0, nil // whole file: Range not asked for, ignored, or the file changed (If-Range)
	case http.StatusPartialContent:
		start, ok := contentRangeStart(resp.Header.Get("Content-Range"))
		same := org.matches(resp)
		if ok && start == offset && same {
			return resp, offset, nil
		}
		resp.Body.Close()
		if offset == 0 {
			return nil, 0, fmt.Errorf("%s: the server sent a range (%s) that was not asked for: %w", d.m.URL(), resp.Header.Get("Content-Range"), ErrHTTP)
		}
		// A range we did not ask for, or of another version of the file
		// (a server that ignores If-Range): start over.
		return d.request(ctx, 0, origin{})
	case http.StatusRequestedRangeNotSatisfiable:
		if offset > 0 && contentRangeTotal(resp.Header.Get("Content-Range")) == offset && org.matches(resp) {
			return resp, offset, nil
		}
		resp.Body.Close()
		if offset > 0 {
			return d.request(ctx, 0, origin{})
		}
	}
	resp.Body.Close()
	err = fmt.Errorf("%s: %s: %w", d.m.URL(), resp.Status, ErrHTTP)
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		err = fmt.Errorf("%w (%w)", err, ErrInterrupted)
	}
	return nil, 0, err
}

// announcedSHA256 is the file's SHA256 as the server announced it, "" if it
// did not: Hugging Face answers a file stored in LFS with a redirect to its
// CDN that carries X-Linked-Etag, the quoted hex SHA256 of the file (the
// final response's ETag is the CDN's own). The header is looked for on the
// response and on each redirect that led to it.
func announcedSHA256(resp *http.Response) string {
	for r, n := resp, 0; r != nil && n <= maxRedirects; n++ {
		if h := strings.ToLower(strings.Trim(strings.TrimPrefix(r.Header.Get("X-Linked-Etag"), "W/"), `"`)); isHexSHA256(h) {
			return h
		}
		if r.Request == nil {
			break
		}
		r = r.Request.Response
	}
	return ""
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// announcedTotal is the full file size the response implies, 0 if unknown.
func announcedTotal(resp *http.Response, offset int64) int64 {
	if resp.StatusCode == http.StatusPartialContent {
		if t := contentRangeTotal(resp.Header.Get("Content-Range")); t > 0 {
			return t
		}
	}
	if resp.ContentLength >= 0 {
		return offset + resp.ContentLength
	}
	return 0
}

// contentRangeStart parses the first byte of "bytes START-END/TOTAL".
func contentRangeStart(h string) (int64, bool) {
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, false
	}
	start, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(start, 10, 64)
	return n, err == nil && n >= 0
}

// contentRangeTotal parses TOTAL of "bytes START-END/TOTAL" or "bytes */TOTAL"; 0 if absent.
func contentRangeTotal(h string) int64 {
	_, total, ok := strings.Cut(h, "/")
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// copy moves the body into w, reporting progress. It returns the bytes now
// in the partial file.
func (d *downloader) copy(ctx context.Context, w io.Writer, body io.Reader, offset, total int64) (int64, error) {
	buf := make([]byte, 256<<10)
	done := offset
	d.report(Progress{Phase: PhaseDownload, Done: done, Total: total, Resumed: offset})
	for {
		if err := ctx.Err(); err != nil {
			return done, fmt.Errorf("download stopped after %d bytes (run pull again to resume): %w", done, err)
		}
		n, rerr := body.Read(buf)
		if n > 0 {
			d.watch.progress(n)
			d.got += int64(n)
			if total > 0 && done+int64(n) > total {
				return done, fmt.Errorf("the server sent more than the %d bytes it announced: %w", total, ErrSizeMismatch)
			}
			if _, err := w.Write(buf[:n]); err != nil {
				return done, writeError(err)
			}
			done += int64(n)
			d.report(Progress{Phase: PhaseDownload, Done: done, Total: total, Resumed: offset})
		}
		if rerr == io.EOF {
			return done, nil
		}
		if rerr != nil {
			return done, fmt.Errorf("transfer stopped after %d bytes (run pull again to resume): %w: %w", done, ErrInterrupted, rerr)
		}
	}
}

func writeError(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("disk full while writing the download (the partial file is kept; free space and pull again): %w: %w", ErrDiskFull, err)
	}
	return fmt.Errorf("cannot write the download: %w", fsProblem(err))
}

// verify checks the finished partial file: size, SHA256 (pinned, else the
// one the server announced) and GGUF structure. A partial file that cannot
// become valid by resuming is removed. announced says the hash checked was
// the server's.
func (d *downloader) verify() (sum string, size int64, announced bool, err error) {
	sum, size, err = d.check()
	if err == nil && d.m.SHA256 == "" {
		org, _ := readOrigin(d.partial + originSuffix)
		announced = org.SHA256 != ""
	}
	return sum, size, announced, err
}

func (d *downloader) check() (string, int64, error) {
	f, err := os.Open(d.partial)
	if err != nil {
		return "", 0, fmt.Errorf("cannot read %s back to check it: %w", d.partial, fsProblem(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("cannot read %s back to check it: %w", d.partial, fsProblem(err))
	}
	size := st.Size()
	if d.m.Size > 0 && size != d.m.Size {
		if size > d.m.Size {
			d.removePartial()
		}
		return "", 0, fmt.Errorf("%s: downloaded %d bytes, expected %d: %w", d.m.File, size, d.m.Size, ErrSizeMismatch)
	}
	h := sha256.New()
	pr := &progressReader{r: f, total: size, report: d.report}
	if _, err := io.CopyBuffer(h, pr, make([]byte, 1<<20)); err != nil {
		return "", 0, fmt.Errorf("cannot read %s back to hash it: %w", d.partial, fsProblem(err))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if d.m.SHA256 != "" && !strings.EqualFold(sum, d.m.SHA256) {
		d.removePartial()
		return "", 0, fmt.Errorf("%s: the downloaded bytes hash to sha256 %s, not the pinned %s; "+
			"the download was removed and nothing under that name was written: %w", d.m.File, sum, strings.ToLower(d.m.SHA256), ErrChecksum)
	}
	if org, _ := readOrigin(d.partial + originSuffix); d.m.SHA256 == "" && org.SHA256 != "" && sum != org.SHA256 {
		d.removePartial()
		return "", 0, fmt.Errorf("%s: the downloaded bytes hash to sha256 %s, not the %s the server announced; "+
			"the download was removed and nothing under that name was written: pull again: %w", d.m.File, sum, org.SHA256, ErrChecksum)
	}
	g, err := gguf.Open(d.partial)
	if err != nil {
		d.removePartial()
		return "", 0, fmt.Errorf("%s (the download was removed): %w: %w", d.m.URL(), ErrNotGGUF, err)
	}
	defer g.Close()
	if d.m.SHA256 == "" {
		if err := checkTensorData(g); err != nil {
			d.removePartial()
			return "", 0, fmt.Errorf("%s: %w; the download was removed (a resumed one may hold the end of another version of the file): pull again, with --sha256 to pin the file: %w", d.m.URL(), err, ErrNotGGUF)
		}
	}
	return sum, size, nil
}

// checkTensorData reads every tensor's data for NaN or infinity in its
// values or block scales: without a hash to compare, what catches bytes
// that do not belong to the file's layout (a resume joined to another
// file that the server gave the same ETag). The header alone says nothing
// of them.
func checkTensorData(g *gguf.File) error {
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if at := gguf.FirstNonFinite(t.Type, g.Data(t)); at >= 0 {
			return fmt.Errorf("tensor %s holds NaN or infinity (element or block %d)", t.Name, at)
		}
	}
	return nil
}

func (d *downloader) removePartial() {
	os.Remove(d.partial)
	os.Remove(d.partial + originSuffix)
}

type progressReader struct {
	r      io.Reader
	done   int64
	total  int64
	report func(Progress)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done += int64(n)
	p.report(Progress{Phase: PhaseVerify, Done: p.done, Total: p.total})
	return n, err
}

// syncDir makes a rename durable; failure only risks the rename, so it is
// not reported.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// humanBytes renders a byte count for messages: "1.08 GiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
