package engine

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
)

// ContextTrimmed says that the oldest turns of the conversation no longer fit
// the context and were left out of the prompt: the model does not see the
// first Dropped messages (system prompts excepted, which are always kept).
// It comes before the reply's tokens, with every reply while turns are left
// out.
type ContextTrimmed struct {
	Dropped int // messages left out, counted from the first non-system one
	Tokens  int // prompt tokens after trimming
	Context int // the context size
}

func (ContextTrimmed) isEvent() {}

// window remembers where the last prompt started, so that the next turn
// leaves out the same messages and the KV cache keeps its prefix: without
// it every turn past a full context would drop one more turn and prefill
// the whole conversation again.
type window struct {
	dropped int          // messages left out of the last prompt
	first   chat.Message // the first message kept, to see that it is the same conversation
}

// fit renders msgs into prompt tokens that leave room for a reply: reserve
// tokens of the context are kept free. When the whole conversation does not
// fit, whole turns (a user message and the replies to it) are left out,
// oldest first, until the prompt takes at most half the context, as
// llama.cpp's and ollama's context shift discard half, so that the turns
// after it reuse the cache instead of prefilling again each time. The last
// user turn is never left out; when it alone fills the context the error
// wraps infer.ErrContextFull.
func (w *window) fit(msgs []chat.Message, ctx, reserve int, encode func([]chat.Message) []int32) (ids []int32, dropped int, err error) {
	sys := 0
	for sys < len(msgs) && msgs[sys].Role == chat.RoleSystem {
		sys++
	}
	// Turn starts after the system prompt: the droppable prefixes end there.
	var starts []int
	lastUser := -1
	for i := sys; i < len(msgs); i++ {
		if msgs[i].Role == chat.RoleUser && i > sys {
			starts = append(starts, i-sys)
		}
		if msgs[i].Role == chat.RoleUser {
			lastUser = i
		}
	}
	build := func(drop int) []int32 {
		kept := make([]chat.Message, 0, len(msgs)-drop)
		kept = append(kept, msgs[:sys]...)
		kept = append(kept, msgs[sys+drop:]...)
		return encode(kept)
	}
	maxDrop := 0
	if lastUser > sys {
		maxDrop = lastUser - sys
	}
	// Resume from the last prompt's start when it is the same conversation.
	start := 0
	if w.dropped > 0 && w.dropped <= maxDrop && msgs[sys+w.dropped] == w.first {
		start = w.dropped
	}
	ids = build(start)
	dropped = start
	if len(ids)+reserve > ctx {
		for _, s := range starts {
			if s <= dropped || s > maxDrop {
				continue
			}
			ids, dropped = build(s), s
			if len(ids) <= ctx/2 {
				break
			}
		}
	}
	w.dropped = dropped
	if dropped > 0 {
		w.first = msgs[sys+dropped]
	}
	if len(ids) >= ctx {
		w.dropped = 0
		return nil, 0, fmt.Errorf("%w: the last message alone takes %d of the context's %d tokens "+
			"(a shorter message fits; --ctx, or context_size in config.toml, gives more room)",
			infer.ErrContextFull, len(ids), ctx)
	}
	return ids, dropped, nil
}

// replyReserve is how much of the context a prompt leaves for the reply: a
// quarter, or the reply's token limit when that is less.
func replyReserve(ctx, maxTokens int) int {
	r := ctx / 4
	if maxTokens > 0 && maxTokens < r {
		r = maxTokens
	}
	return r
}
