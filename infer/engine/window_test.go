package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
)

// wordTokens encodes each word of every message as one token, and each
// message's frame as two, like a chat template's turn markers.
func wordTokens(msgs []chat.Message) []int32 {
	var ids []int32
	for _, m := range msgs {
		ids = append(ids, 1)
		for range strings.Fields(m.Content) {
			ids = append(ids, 2)
		}
		ids = append(ids, 3)
	}
	return ids
}

func turns(n, words int) []chat.Message {
	text := strings.TrimSpace(strings.Repeat("w ", words))
	msgs := []chat.Message{{Role: chat.RoleSystem, Content: "be brief"}}
	for i := range n {
		msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: text + " " + string(rune('a'+i))})
		if i < n-1 {
			msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: text})
		}
	}
	return msgs
}

func TestWindowFit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		msgs        []chat.Message
		ctx         int
		wantDropped int
		wantErr     error
	}{
		// 4 tokens for the system prompt, 10 per message.
		{"fits", turns(3, 8), 128, 0, nil},
		// 54 tokens + a reserve of 16 > 64: drop turns until at most 32.
		{"drops the oldest turns to half the context", turns(3, 8), 64, 4, nil},
		{"keeps the last user turn", turns(2, 40), 128, 2, nil},
		{"last turn alone is too long", turns(2, 200), 128, 0, infer.ErrContextFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w window
			ids, dropped, err := w.fit(tc.msgs, tc.ctx, replyReserve(tc.ctx, 0), wordTokens)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if dropped != tc.wantDropped {
				t.Errorf("dropped %d messages, want %d", dropped, tc.wantDropped)
			}
			kept := append([]chat.Message{tc.msgs[0]}, tc.msgs[1+dropped:]...)
			if got, want := len(ids), len(wordTokens(kept)); got != want {
				t.Errorf("%d prompt tokens, want %d (the kept messages)", got, want)
			}
			if len(ids) >= tc.ctx {
				t.Errorf("%d prompt tokens do not fit a context of %d", len(ids), tc.ctx)
			}
			if dropped > 0 && tc.msgs[1+dropped].Role != chat.RoleUser {
				t.Errorf("the prompt starts with a %s message, not a whole turn", tc.msgs[1+dropped].Role)
			}
		})
	}
}

// A conversation past a full context keeps leaving out the same turns while
// the rest fits, so that the KV cache keeps its prefix.
func TestWindowKeepsItsStart(t *testing.T) {
	var w window
	msgs := turns(3, 8)
	_, first, err := w.fit(msgs, 64, 16, wordTokens)
	if err != nil || first == 0 {
		t.Fatalf("first fit: dropped %d, err %v", first, err)
	}
	msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: "ok"},
		chat.Message{Role: chat.RoleUser, Content: "next"})
	_, again, err := w.fit(msgs, 64, 16, wordTokens)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("the next turn dropped %d messages, want the same %d (prefix kept)", again, first)
	}
	// Another conversation (a different message where the last one started)
	// starts from its own beginning.
	other := turns(2, 2)
	_, d, err := w.fit(other, 64, 16, wordTokens)
	if err != nil || d != 0 {
		t.Errorf("a new short conversation dropped %d (err %v), want 0", d, err)
	}
}

// A chat past a full context goes on: every turn gets a reply, and the
// engine says which turns the model no longer sees.
func TestFullContextDropsOldestTurns(t *testing.T) {
	e := start(t, testFile(t), Options{Context: 128})
	msgs := []chat.Message{{Role: chat.RoleSystem, Content: "You are brief."}}
	trimmed := 0
	for turn := range 8 {
		msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: "Tell me one more short thing, please."})
		e.Generate(GenerateRequest{Messages: msgs, MaxTokens: 16, Sampling: greedy})
		var text string
		var done Done
		for _, ev := range waitFor[Done](t, e) {
			switch ev := ev.(type) {
			case Error:
				t.Fatalf("turn %d: %v", turn+1, ev.Err)
			case ContextTrimmed:
				if ev.Tokens >= ev.Context || ev.Dropped < trimmed {
					t.Errorf("turn %d: %+v after %d dropped", turn+1, ev, trimmed)
				}
				trimmed = ev.Dropped
			case Token:
				text += ev.Text
			case Done:
				done = ev
			}
		}
		if done.Stats.DecodeTokens == 0 {
			t.Fatalf("turn %d: nothing decoded (%+v)", turn+1, done)
		}
		msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: text})
	}
	if trimmed == 0 {
		t.Error("eight turns in 128 tokens left nothing out")
	}
}
