package engine

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/chat/jinja"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/synth"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// familyFile is a synthetic tiny model of arch with its family's real
// tokenizer (cut) and chat template: Llama 3.2's for llama, Qwen2.5's for
// qwen2.
func familyFile(t *testing.T, arch string) *gguf.File {
	t.Helper()
	shapes := map[string]map[string]synth.Shape{"llama": synth.LlamaShapes, "qwen2": synth.Qwen2Shapes}
	s := shapes[arch]["tiny"]
	s.Vocab = 2048
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := synth.Write(path, synth.Options{Shape: s, Type: gguf.Q8_0, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// llamacppPrompt is a conversation's prompt as llama.cpp makes it: the
// file's template rendered, a BOS it writes dropped where the tokenizer
// adds one, the text tokenized whole with special tokens parsed.
func llamacppPrompt(t *testing.T, f *gguf.File, tok *tokenizer.Tokenizer, msgs string) []int32 {
	t.Helper()
	src, _ := f.KV.String("tokenizer.chat_template")
	tpl, err := jinja.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := f.KV.Strings("tokenizer.ggml.tokens")
	bos, _ := f.KV.Uint("tokenizer.ggml.bos_token_id")
	vars := jinja.NewDict()
	vars.Set("add_generation_prompt", true)
	vars.Set("bos_token", jinja.Text(tokens[bos]))
	m, err := jinja.FromJSON([]byte(msgs), true)
	if err != nil {
		t.Fatal(err)
	}
	vars.Set("messages", m)
	out, err := tpl.RenderValues(vars, jinja.Options{})
	if err != nil {
		t.Fatal(err)
	}
	text, ids := out.S, []int32(nil)
	if tok.AddBOS() {
		text, ids = strings.TrimPrefix(text, tokens[bos]), []int32{tok.BOS()}
	}
	return append(ids, tok.Encode(text, true)...)
}

// The engine (the chat, `bonsai run`) prompts a Llama 3.2-templated and a
// Qwen2.5-templated model with llama.cpp's tokens, and stops at the
// family's end of turn: its reply is the model's greedy decoding of that
// prompt, token for token, up to the first stop token.
func TestFamilyPromptsAsLlamaCpp(t *testing.T) {
	for _, c := range []struct{ arch, stop string }{{"llama", "<|eot_id|>"}, {"qwen2", "<|im_end|>"}} {
		t.Run(c.arch, func(t *testing.T) {
			f := familyFile(t, c.arch)
			tok, err := tokenizer.FromGGUF(f.KV)
			if err != nil {
				t.Fatal(err)
			}
			e := start(t, f, Options{Context: 512})
			if got := e.cur.tmpl.StopStrings(); !slices.Contains(got, c.stop) {
				t.Errorf("stops %q lack %q", got, c.stop)
			}
			msgs := `[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, ` +
				`{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Say it again"}]`
			want := llamacppPrompt(t, f, tok, msgs)
			conv := []chat.Message{{Role: chat.RoleSystem, Content: "Be brief."}, {Role: chat.RoleUser, Content: "Hi"},
				{Role: chat.RoleAssistant, Content: "Hello!"}, {Role: chat.RoleUser, Content: "Say it again"}}
			e.Generate(GenerateRequest{Messages: conv, MaxTokens: 12, Sampling: greedy})
			r := collect(t, e)
			if r.done.Stats.PrefillTokens != len(want) {
				t.Errorf("prefilled %d tokens, llama.cpp's prompt has %d", r.done.Stats.PrefillTokens, len(want))
			}
			m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 512})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := m.Forward(want, 0); err != nil {
				t.Fatal(err)
			}
			var greedyIDs []int32
			for i := range 12 {
				id := sample.Greedy(m.Logits())
				greedyIDs = append(greedyIDs, id)
				if s, _ := tok.ID(c.stop); id == s {
					break
				}
				if err := m.Forward([]int32{id}, len(want)+i); err != nil {
					t.Fatal(err)
				}
			}
			// Tokens that end inside a character stream no text of their
			// own: the engine's are the greedy ones in order, some left out,
			// and its text is theirs.
			dec := tok.NewStreamDecoder()
			var text string
			for _, id := range greedyIDs {
				if s, _ := tok.ID(c.stop); id != s {
					text += dec.Next(id)
				}
			}
			text += dec.Flush()
			// Neither template has reasoning: the reply is all answer, as
			// the model wrote it.
			parsed := text
			inOrder, j := true, 0
			for _, id := range r.ids {
				for j < len(greedyIDs) && greedyIDs[j] != id {
					j++
				}
				inOrder = inOrder && j < len(greedyIDs)
				j++
			}
			if r.text != parsed || parsed == "" || !inOrder {
				t.Errorf("engine %v %q, greedy decoding of llama.cpp's prompt %v %q", r.ids, r.text, greedyIDs, parsed)
			}
		})
	}
}
