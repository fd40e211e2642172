package session

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenSession builds a conversation with every kind of turn, on the fake
// clock, so exports are byte-for-byte reproducible.
func goldenSession(t *testing.T) *Session {
	t.Helper()
	// No background flushes: they would read the fake clock at random.
	s := openTest(t, Options{FlushInterval: time.Hour})
	ctx := context.Background()
	in, err := s.Create(ctx, Meta{Model: "Bonsai-1.7B.gguf", Variant: "Bonsai-1.7B", Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, in.ID, chat.RoleSystem, "You are a gardener.")
	mustAdd(t, s, in.ID, chat.RoleUser, "How often should I water a ficus bonsai?")
	w, err := s.BeginReply(ctx, in.ID, Meta{Model: "Bonsai-1.7B.gguf", Variant: "Bonsai-1.7B", Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append("When the top centimetre of soil is dry.\n\n```\ncheck daily\n```", "Ficus likes moisture but not soggy roots.")
	if err := w.Finish(Stats{PromptTokens: 30, GenTokens: 21, PrefillTPS: 310.25, DecodeTPS: 55.5, TTFT: 97 * time.Millisecond}, false); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, in.ID, chat.RoleUser, "And in winter?")
	w, err = s.BeginReply(ctx, in.ID, Meta{Model: "Bonsai-1.7B.gguf", Backend: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append("Less often, because", "")
	if err := w.Finish(Stats{PromptTokens: 12, GenTokens: 4, DecodeTPS: 80, TTFT: 20 * time.Millisecond}, true); err != nil {
		t.Fatal(err)
	}
	sess, err := s.Load(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestExportGolden(t *testing.T) {
	sess := goldenSession(t)
	for _, tc := range []struct {
		format Format
		golden string
	}{
		{Markdown, "export.md"},
		{JSON, "export.json"},
	} {
		var buf bytes.Buffer
		if err := Write(&buf, sess, tc.format); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, tc.golden, buf.Bytes())

		// Export to a file writes the same bytes.
		path := filepath.Join(t.TempDir(), "out."+string(tc.format))
		if err := Export(sess, tc.format, path); err != nil {
			t.Fatal(err)
		}
		file, _ := os.ReadFile(path)
		if !bytes.Equal(file, buf.Bytes()) {
			t.Errorf("Export(%s) file differs from Write", tc.format)
		}
	}
}

func TestExportUnknownFormatLeavesFileAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keep.txt")
	os.WriteFile(path, []byte("precious"), 0o644)
	err := Export(&Session{}, Format("pdf"), path)
	if !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("err = %v, want ErrUnknownFormat", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "precious" {
		t.Fatalf("file changed to %q", got)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"md": Markdown, "Markdown": Markdown, "JSON": JSON} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("yaml"); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("ParseFormat(yaml): %v", err)
	}
}
