package session

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

func TestFTSQuery(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"   ", ""},
		{"bonsai", `"bonsai"`},
		{"two words", `"two" AND "words"`},
		{`say "hi"`, `"say" AND """hi"""`},
		{"prefix*", `"prefix"*`},
		{"*", ""},
		{"NEAR( OR AND -x", `"NEAR(" AND "OR" AND "AND" AND "-x"`},
		{"a\x00b", `"a" AND "b"`},
	} {
		if got := ftsQuery(tc.in); got != tc.want {
			t.Errorf("ftsQuery(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestSearchFindsOldReplies(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	old, _ := s.Create(ctx, Meta{})
	mustAdd(t, s, old.ID, chat.RoleUser, "How do I wire a juniper?")
	w, err := s.BeginReply(ctx, old.ID, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	w.Append("Wrap aluminium wire at forty-five degrees, ", "The user wants wiring advice; mention café-style déjà vu.")
	w.Append("then leave it for a season.", "")
	if err := w.Finish(Stats{}, false); err != nil {
		t.Fatal(err)
	}
	other, _ := s.Create(ctx, Meta{})
	mustAdd(t, s, other.ID, chat.RoleUser, "What's the capital of France? Don't guess.")

	for _, tc := range []struct {
		query   string
		session int64
		role    string
		snippet string // must appear in the snippet
	}{
		{"aluminium", old.ID, chat.RoleAssistant, "**aluminium**"},
		{"season", old.ID, chat.RoleAssistant, "**season**"},
		{"wiring advice", old.ID, chat.RoleAssistant, "**wiring** **advice**"}, // from thinking
		{"cafe deja", old.ID, chat.RoleAssistant, "**café**"},                  // accents folded
		{"JUNIPER", old.ID, chat.RoleUser, "**juniper**"},                      // case folded
		{"capit*", other.ID, chat.RoleUser, "**capital**"},                     // prefix
		{"don't", other.ID, chat.RoleUser, "**Don't**"},                        // punctuation is literal
		{`"France?"`, other.ID, chat.RoleUser, "**France**"},                   // quotes are literal
		{"forty-five", old.ID, chat.RoleAssistant, "**forty-five**"},           // hyphenated phrase
	} {
		hits, err := s.Search(ctx, tc.query, SearchOptions{})
		if err != nil {
			t.Errorf("Search(%q): %v", tc.query, err)
			continue
		}
		if len(hits) != 1 {
			t.Errorf("Search(%q) = %+v, want one hit", tc.query, hits)
			continue
		}
		h := hits[0]
		if h.SessionID != tc.session || h.Role != tc.role || !strings.Contains(h.Snippet, tc.snippet) {
			t.Errorf("Search(%q) = %+v, want session %d, role %s, snippet containing %q", tc.query, h, tc.session, tc.role, tc.snippet)
		}
	}

	for _, q := range []string{"", "nothing-like-this", "juniper France"} {
		hits, err := s.Search(ctx, q, SearchOptions{})
		if err != nil || len(hits) != 0 {
			t.Errorf("Search(%q) = %+v, %v; want no hits", q, hits, err)
		}
	}

	hits, err := s.Search(ctx, "season", SearchOptions{Open: "<b>", Close: "</b>"})
	if err != nil || len(hits) != 1 || !strings.Contains(hits[0].Snippet, "<b>season</b>") {
		t.Errorf("custom markers: %+v, %v", hits, err)
	}

	if err := s.Delete(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	if hits, _ := s.Search(ctx, "aluminium", SearchOptions{}); len(hits) != 0 {
		t.Errorf("deleted session still found: %+v", hits)
	}
}

func TestSearchLimit(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	in, _ := s.Create(ctx, Meta{})
	for range 10 {
		mustAdd(t, s, in.ID, chat.RoleUser, "repeat after me")
	}
	hits, err := s.Search(ctx, "repeat", SearchOptions{Limit: 3})
	if err != nil || len(hits) != 3 {
		t.Fatalf("got %d hits, %v; want 3", len(hits), err)
	}
	if hits, _ := s.Search(ctx, "repeat", SearchOptions{}); len(hits) != 10 {
		t.Fatalf("default limit: %d hits, want 10", len(hits))
	}
}

// Whatever a user types, search must not fail with an FTS5 syntax error.
func FuzzSearchQuery(f *testing.F) {
	for _, q := range []string{"bonsai", `"unbalanced`, "a AND OR NOT b", "NEAR(a b)", "col:x", "^start", "x*", "***", "(", "'", "-", "\x00"} {
		f.Add(q)
	}
	s, err := Open(filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	in, _ := s.Create(ctx, Meta{})
	if _, err := s.Add(ctx, in.ID, Message{Role: chat.RoleUser, Content: "bonsai col:x (start) \"quoted\" - NEAR"}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if _, err := s.Search(ctx, q, SearchOptions{}); err != nil {
			t.Fatalf("Search(%q): %v", q, err)
		}
	})
}
