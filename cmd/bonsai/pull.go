package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/bonsai-chat/bonsai/infer/hub"
	"github.com/bonsai-chat/bonsai/tui"
	"golang.org/x/term"
)

func init() {
	register(command{
		name:    "pull",
		summary: "download a model by name (bonsai-8b, ...) or GGUF URL",
		run:     runPull,
	})
}

func runPull(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", hub.DefaultDir(), "models directory")
	sum := fs.String("sha256", "", "expected SHA256 of the file (hex)")
	retries := fs.Int("retries", 5, "automatic resumptions after a dropped connection")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai pull [--dir DIR] [--sha256 HEX] NAME|URL")
		fmt.Fprintln(stderr, "\nnames:")
		for _, m := range hub.Registry {
			fmt.Fprintf(stderr, "  %-20s %s%s\n", m.Name, m.Summary, unrunnableMark(m.Arch(), m.Types()))
		}
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return fmt.Errorf("%w: pull takes one NAME or URL, got %d arguments", errUsage, len(pos))
	}
	if *sum != "" && !pullIsHexSHA256(*sum) {
		return fmt.Errorf("%w: --sha256 %q is not 64 hex digits", errUsage, *sum)
	}
	// SIGTERM and SIGHUP too: the download stops through its context, so
	// the partial file is left in a state the next pull resumes (or, when
	// empty, removed).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	target := pos[0]
	if m, ok := hub.Lookup(target); ok {
		if mark := unrunnableMark(m.Arch(), m.Types()); mark != "" {
			fmt.Fprintf(stderr, "note: %s:%s; downloading it anyway\n", m.Name, mark)
		}
	}
	bar := newPullProgressBar(stderr, target)
	res, err := hub.Pull(ctx, target, *dir, hub.Options{
		SHA256:   strings.ToLower(*sum),
		Retries:  *retries,
		Progress: bar.update,
		Retried:  func(err error) { bar.note("retrying: %s", tui.Printable(err.Error())) },
	})
	bar.finish()
	if err != nil {
		return err // hub's messages say whether a rerun resumes
	}
	if res.AlreadyPresent {
		fmt.Fprintf(stdout, "%s is already downloaded: %s\n", target, res.Path)
		return nil
	}
	fmt.Fprintf(stdout, "%s\nsha256 %s, %s\n", res.Path, res.SHA256, pullFormatBytes(res.Size))
	if res.Announced {
		fmt.Fprintln(stdout, "verified against the sha256 the server announced (no hash is pinned for it)")
	}
	if !res.Verified {
		fmt.Fprintln(stderr, "note: not verified by hash (no SHA256 is known for it): only its size and GGUF structure were checked; "+
			"compare the sha256 above with the publisher's, or pull with --sha256 HEX")
	}
	return nil
}

func pullIsHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// pullProgressBar draws download progress on a terminal (redrawn in place, at
// most ten times a second) or as occasional plain lines otherwise.
type pullProgressBar struct {
	w        io.Writer
	label    string
	tty      bool
	start    time.Time
	last     time.Time
	lastTen  int64 // plain mode: the last tenth reported
	phase    hub.Phase
	drawn    bool
	received int64 // bytes this run received, for the rate
}

func newPullProgressBar(w io.Writer, label string) *pullProgressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &pullProgressBar{w: w, label: label, tty: tty, start: time.Now(), lastTen: -1}
}

func (b *pullProgressBar) update(p hub.Progress) {
	now := time.Now()
	if p.Phase != b.phase {
		if b.drawn && b.tty {
			fmt.Fprintln(b.w)
		}
		b.phase, b.start, b.lastTen, b.drawn = p.Phase, now, -1, false
	}
	b.received = p.Done - p.Resumed
	complete := p.Total > 0 && p.Done >= p.Total
	if b.tty {
		if now.Sub(b.last) < 100*time.Millisecond && !complete {
			return
		}
		b.last = now
		fmt.Fprintf(b.w, "\r\x1b[K%s", b.line(p, now))
		b.drawn = true
		return
	}
	// Plain output: a line per tenth of the file (or per 100 MiB when the
	// size is unknown); verification only when it ends.
	if p.Phase == hub.PhaseVerify && !complete {
		return
	}
	tenth := p.Done / (100 << 20)
	if p.Total > 0 {
		tenth = p.Done * 10 / p.Total
	}
	if tenth != b.lastTen {
		b.lastTen = tenth
		fmt.Fprintln(b.w, b.line(p, now))
	}
}

func (b *pullProgressBar) line(p hub.Progress, now time.Time) string {
	verb := "downloading"
	if p.Phase == hub.PhaseVerify {
		verb = "verifying"
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%s %s", verb, b.label)
	if p.Total > 0 {
		frac := float64(p.Done) / float64(p.Total)
		const width = 24
		filled := int(frac * width)
		fmt.Fprintf(&s, " [%s%s] %5.1f%% %s / %s", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), 100*frac, pullFormatBytes(p.Done), pullFormatBytes(p.Total))
	} else {
		fmt.Fprintf(&s, " %s", pullFormatBytes(p.Done))
	}
	if elapsed := now.Sub(b.start).Seconds(); elapsed > 0.5 && p.Phase == hub.PhaseDownload {
		rate := float64(b.received) / elapsed
		fmt.Fprintf(&s, "  %s/s", pullFormatBytes(int64(rate)))
		if p.Total > 0 && rate > 0 {
			eta := time.Duration(float64(p.Total-p.Done) / rate * float64(time.Second))
			fmt.Fprintf(&s, "  ETA %s", eta.Round(time.Second))
		}
	}
	if p.Resumed > 0 && p.Phase == hub.PhaseDownload {
		fmt.Fprintf(&s, "  (resumed at %s)", pullFormatBytes(p.Resumed))
	}
	return s.String()
}

func (b *pullProgressBar) note(format string, args ...any) {
	if b.drawn && b.tty {
		fmt.Fprintln(b.w)
		b.drawn = false
	}
	fmt.Fprintf(b.w, format+"\n", args...)
}

func (b *pullProgressBar) finish() {
	if b.drawn && b.tty {
		fmt.Fprintln(b.w)
	}
	b.drawn = false
}

// pullFormatBytes renders a size in binary units: "1.08 GiB".
func pullFormatBytes(n int64) string {
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
