// Command corpus builds the training data of bonsai's default model: chat
// conversations in the Qwen3 template whose answers are verses of the King
// James Bible and sayings of the Dhammapada (both public domain), plus a few
// hand-written greetings and refusals, tokenized with bonsai's own Qwen3
// tokenizer so that training and inference see the same ids.
//
//	go run ./tools/train-default/corpus -src /tmp/bonsai-corpus -out .carry/train-default
//
// -src holds kjv.txt and dhammapada.txt as get-corpus.sh writes them. The
// output is train.bin and val.bin (little-endian uint32 token ids, the
// conversations concatenated), samples.txt (the first rendered
// conversations) and stats.txt. Held-out conversations come from chapters
// and sayings that training never sees.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/qwen"
)

func main() {
	src := flag.String("src", "/tmp/bonsai-corpus", "folder with kjv.txt and dhammapada.txt (see get-corpus.sh)")
	out := flag.String("out", ".carry/train-default", "output folder")
	seed := flag.Uint64("seed", 1, "random seed")
	copies := flag.Int("copies", 0, "copying exchanges added to the training conversations (0: none, as in the shipped model)")
	scramble := flag.Float64("scramble", 0, "share of the copying passages whose words are shuffled")
	flag.Parse()
	if err := run(*src, *out, *seed, *copies, *scramble); err != nil {
		fmt.Fprintln(os.Stderr, "corpus:", err)
		os.Exit(1)
	}
}

func run(src, out string, seed uint64, copies int, scramble float64) error {
	verses, err := readFile(filepath.Join(src, "kjv.txt"), parseKJV)
	if err != nil {
		return err
	}
	sayings, err := readFile(filepath.Join(src, "dhammapada.txt"), parseDhammapada)
	if err != nil {
		return err
	}
	tok, err := qwen3Tokenizer()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var trainVerses, valVerses []verse
	for _, v := range verses {
		if heldOut(v.Book, v.Chapter) {
			valVerses = append(valVerses, v)
		} else {
			trainVerses = append(trainVerses, v)
		}
	}
	var trainSayings, valSayings []saying
	for _, s := range sayings {
		if s.N%40 == 0 {
			valSayings = append(valSayings, s)
		} else {
			trainSayings = append(trainSayings, s)
		}
	}
	train := conversations(rng, trainVerses, trainSayings, 3000)
	val := conversations(rng, valVerses, valSayings, 60)
	// The copying tasks come from a stream of their own, after the others,
	// so that val.bin (recitation only) stays what earlier models were
	// measured on.
	crng := rand.New(rand.NewPCG(seed, 0xc0b1))
	var cxs []exchange
	kinds := map[string]int{}
	for range copies {
		kind, x := copyExchange(crng, trainVerses, trainSayings, scramble)
		kinds[kind]++
		cxs = append(cxs, x)
	}
	nRecite := len(train)
	if copies > 0 {
		train = append(train, group(crng, cxs)...)
		crng.Shuffle(len(train), func(i, j int) { train[i], train[j] = train[j], train[i] })
	}

	tpl := chat.Qwen3()
	stats := &strings.Builder{}
	fmt.Fprintf(stats, "verses %d (held out %d), sayings %d (held out %d)\n", len(verses), len(valVerses), len(sayings), len(valSayings))
	if copies > 0 {
		fmt.Fprintf(stats, "copying exchanges %d (repeat %d, edit %d, mention %d, summary %d; %.0f%% scrambled) in %d of the %d training conversations\n",
			copies, kinds["repeat"], kinds["edit"], kinds["mention"], kinds["summary"], 100*scramble, len(train)-nRecite, len(train))
	}
	for _, split := range []struct {
		name  string
		convs [][]chat.Message
	}{{"train", train}, {"val", val}} {
		n, err := writeTokens(filepath.Join(out, split.name+".bin"), tok, tpl, split.convs)
		if err != nil {
			return err
		}
		fmt.Fprintf(stats, "%s: %d conversations, %d tokens\n", split.name, len(split.convs), n)
	}
	var samples strings.Builder
	for _, c := range train[:40] {
		samples.WriteString(render(tpl, c))
		samples.WriteString("----\n")
	}
	if err := os.WriteFile(filepath.Join(out, "samples.txt"), []byte(samples.String()), 0o644); err != nil {
		return err
	}
	if err := writePrompts(filepath.Join(out, "prompts.json"), tok, tpl); err != nil {
		return err
	}
	// Held-out copying tasks: passages of held-out verses and sayings only.
	erng := rand.New(rand.NewPCG(seed, 0xe7a1))
	if err := writeCopyEval(filepath.Join(out, "copyeval.json"), erng, tok, tpl, valVerses, valSayings, 200); err != nil {
		return err
	}
	fmt.Print(stats.String())
	return os.WriteFile(filepath.Join(out, "stats.txt"), []byte(stats.String()), 0o644)
}

func readFile[T any](path string, parse func(io.Reader) ([]T, error)) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (run tools/train-default/get-corpus.sh first)", err)
	}
	defer f.Close()
	items, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return items, nil
}

// qwen3Tokenizer is the tokenizer the exported model file carries.
func qwen3Tokenizer() (*tokenizer.Tokenizer, error) {
	v, err := qwen.Qwen3Vocab()
	if err != nil {
		return nil, err
	}
	return tokenizer.New(tokenizer.Config{Model: v.Model, Pre: v.Pre, Tokens: v.Tokens, Types: v.Types, Merges: v.Merges,
		BOS: qwen.BOS, EOS: qwen.EOS, EOT: tokenizer.NoToken, EOM: tokenizer.NoToken, PAD: qwen.PAD})
}

// render writes a conversation the way the model will see it at inference:
// the prompt up to the generation prompt (thinking off), then the answer and
// the end of the turn.
func render(tpl *chat.Template, conv []chat.Message) string {
	last := conv[len(conv)-1]
	return tpl.Render(conv[:len(conv)-1], true, false) + last.Content + chat.IMEnd + "\n"
}

func writeTokens(path string, tok *tokenizer.Tokenizer, tpl *chat.Template, convs [][]chat.Message) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriter(f)
	n := 0
	var buf [4]byte
	for _, c := range convs {
		for _, id := range tok.Encode(render(tpl, c), true) {
			binary.LittleEndian.PutUint32(buf[:], uint32(id))
			w.Write(buf[:])
			n++
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	return n, f.Close()
}

// evalPrompts are what train.py decodes greedily after training, so that
// bonsai's engine can be checked to produce the same tokens.
var evalPrompts = [][]chat.Message{
	{{Role: chat.RoleUser, Content: "Hello!"}},
	{{Role: chat.RoleUser, Content: "Recite John 3:16."}},
	{{Role: chat.RoleUser, Content: "Give me a proverb."}},
	{{Role: chat.RoleUser, Content: "Who are you?"}},
	{{Role: chat.RoleUser, Content: "Repeat this passage word for word:\n\nBlessed are the meek: for they shall inherit the earth."}},
}

func writePrompts(path string, tok *tokenizer.Tokenizer, tpl *chat.Template) error {
	type prompt struct {
		Text string  `json:"text"`
		IDs  []int32 `json:"ids"`
	}
	var ps []prompt
	for _, msgs := range evalPrompts {
		text := tpl.Render(msgs, true, false)
		ps = append(ps, prompt{text, tok.Encode(text, true)})
	}
	data, err := json.MarshalIndent(ps, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// writeCopyEval writes n copying tasks with their expected answers, as
// token ids (the answer ending with <|im_end|>), for train.py to decode
// greedily and count exact copies.
func writeCopyEval(path string, rng *rand.Rand, tok *tokenizer.Tokenizer, tpl *chat.Template, verses []verse, sayings []saying, n int) error {
	type task struct {
		Kind   string    `json:"kind"`
		Prompt string    `json:"prompt"`
		Answer string    `json:"answer"`
		IDs    []int32   `json:"prompt_ids"`
		Want   [][]int32 `json:"answer_ids"` // each a right answer
	}
	var ts []task
	for range n {
		kind, x := copyExchange(rng, verses, sayings, 0)
		answers := []string{x.Answer}
		if kind == "summary" {
			// Any lead-in will do; the quotation must be exact.
			answers = nil
			for _, lead := range summaryLeads {
				for _, other := range summaryLeads {
					if rest, ok := strings.CutPrefix(x.Answer, other); ok {
						answers = append(answers, lead+rest)
					}
				}
			}
		}
		t := task{Kind: kind, Prompt: x.Question, Answer: x.Answer}
		for _, a := range answers {
			conv := []chat.Message{{Role: chat.RoleUser, Content: x.Question}, {Role: chat.RoleAssistant, Content: a}}
			prompt := tok.Encode(tpl.Render(conv[:1], true, false), true)
			all := tok.Encode(render(tpl, conv), true)
			if len(all) <= len(prompt) || !slices.Equal(all[:len(prompt)], prompt) {
				return fmt.Errorf("copy eval: the prompt's tokens are not a prefix of the conversation's: %q", x.Question)
			}
			t.IDs = prompt
			t.Want = append(t.Want, all[len(prompt):len(all)-1]) // up to <|im_end|>, without the newline after it
		}
		ts = append(ts, t)
	}
	data, err := json.MarshalIndent(ts, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// heldOut picks about one chapter in 40 for validation, by a hash of its name
// so the split does not depend on the order of the text.
func heldOut(book string, chapter int) bool {
	h := uint32(2166136261)
	for _, c := range []byte(book + " " + strconv.Itoa(chapter)) {
		h = (h ^ uint32(c)) * 16777619
	}
	return h%40 == 0
}

type verse struct {
	Book           string
	Chapter, Verse int
	Text           string
}

func (v verse) Ref() string { return fmt.Sprintf("%s %d:%d", v.Book, v.Chapter, v.Verse) }

var (
	chapterLine = regexp.MustCompile(`^(\S.*) (\d+)$`)
	verseLine   = regexp.MustCompile(`^\s+(\d+) (.+)$`)
)

// parseKJV reads the `bible -l100000` dump: "Book C" headings and indented
// "V text" lines.
func parseKJV(r io.Reader) ([]verse, error) {
	var verses []verse
	book, chapter := "", 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if m := chapterLine.FindStringSubmatch(text); m != nil {
			book = m[1]
			chapter, _ = strconv.Atoi(m[2])
			continue
		}
		if m := verseLine.FindStringSubmatch(text); m != nil {
			if book == "" {
				return nil, fmt.Errorf("line %d: verse before any chapter heading", line)
			}
			n, _ := strconv.Atoi(m[1])
			verses = append(verses, verse{Book: book, Chapter: chapter, Verse: n, Text: strings.TrimSpace(m[2])})
			continue
		}
		if strings.TrimSpace(text) != "" {
			return nil, fmt.Errorf("line %d: neither a heading nor a verse: %q", line, text)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(verses) < 30000 {
		return nil, fmt.Errorf("only %d verses: not the whole Bible", len(verses))
	}
	return verses, nil
}

type saying struct {
	N    int
	Text string
}

var sayingEnd = regexp.MustCompile(`^(.*?)\s*(\d+(?:, \d+)*)$`)

// parseDhammapada reads John Richards' translation: after the introduction,
// paragraphs that end with their verse number.
func parseDhammapada(r io.Reader) ([]saying, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	text := strings.ReplaceAll(string(data), "\r", "")
	start := strings.Index(text, "\n1. The Pairs\n")
	if start < 0 {
		return nil, fmt.Errorf("no \"1. The Pairs\" chapter")
	}
	var sayings []saying
	next := 1 // the verse number the next paragraph must start with
	for _, para := range strings.Split(text[start:], "\n\n") {
		joined := strings.Join(strings.Fields(para), " ")
		m := sayingEnd.FindStringSubmatch(joined)
		if m == nil || m[1] == "" {
			continue // chapter headings and the closing lines
		}
		// Some paragraphs are several verses: "… wisdom. 58, 59".
		nums := strings.Split(m[2], ", ")
		first, _ := strconv.Atoi(nums[0])
		last, _ := strconv.Atoi(nums[len(nums)-1])
		if first != next {
			return nil, fmt.Errorf("verse %d follows verse %d", first, next-1)
		}
		sayings = append(sayings, saying{N: first, Text: m[1]})
		next = last + 1
	}
	if next != 424 {
		return nil, fmt.Errorf("verses end at %d, want 423", next-1)
	}
	return sayings, nil
}
