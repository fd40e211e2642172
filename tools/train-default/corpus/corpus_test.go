package main

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

func TestParseKJV(t *testing.T) {
	var b strings.Builder
	b.WriteString("\nGenesis 1\n\n  1 In the beginning God created the heaven and the earth.\n  2 And the earth was without form.\n\n1 Samuel 3\n\n  7 Now Samuel did not yet know the LORD.\n")
	// parseKJV refuses anything shorter than a whole Bible; pad with verses.
	for i := 0; i < 30000; i++ {
		b.WriteString("  8 And so on.\n")
	}
	verses, err := parseKJV(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if v := verses[2]; v.Book != "1 Samuel" || v.Chapter != 3 || v.Verse != 7 || v.Ref() != "1 Samuel 3:7" {
		t.Errorf("verse 2 = %+v", v)
	}
	if verses[0].Text != "In the beginning God created the heaven and the earth." {
		t.Errorf("verse 0 text %q", verses[0].Text)
	}
	if _, err := parseKJV(strings.NewReader("  1 a verse before a heading\n")); err == nil {
		t.Errorf("a verse before any heading was accepted")
	}
	if _, err := parseKJV(strings.NewReader("Genesis 1\n  1 Too short.\n")); err == nil {
		t.Errorf("a partial Bible was accepted")
	}
}

func TestParseDhammapada(t *testing.T) {
	var b strings.Builder
	b.WriteString("Introduction, 3 paragraphs. 12\n\n1. The Pairs\n\n")
	for n := 1; n <= 423; n++ {
		switch n {
		case 58:
			b.WriteString("A saying of two\nverses. 58, 59\n\n")
		case 59:
		default:
			b.WriteString("Saying\nnumber. " + strconv.Itoa(n) + "\n\n")
		}
		if n == 100 {
			b.WriteString("8. Thousands\n\n")
		}
	}
	sayings, err := parseDhammapada(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(sayings) != 422 || sayings[57].N != 58 || sayings[57].Text != "A saying of two verses." || sayings[58].N != 60 {
		t.Errorf("got %d sayings; 58th %+v, 59th %+v", len(sayings), sayings[57], sayings[58])
	}
	if _, err := parseDhammapada(strings.NewReader("1. The Pairs\n\nOne. 1\n\nThree. 3\n")); err == nil {
		t.Errorf("a missing verse was accepted")
	}
}

func TestConversationsShape(t *testing.T) {
	verses := []verse{{"John", 3, 16, "For God so loved the world, that he gave his only begotten Son."}, {"John", 3, 17, "For God sent not his Son."}}
	sayings := []saying{{1, "Mind precedes its objects."}}
	convs := conversations(rand.New(rand.NewPCG(1, 1)), verses, sayings, 5)
	tpl := chat.Qwen3()
	for _, c := range convs {
		if c[len(c)-1].Role != chat.RoleAssistant || c[len(c)-2].Role != chat.RoleUser {
			t.Fatalf("conversation does not end with a question and its answer: %+v", c)
		}
		text := render(tpl, c)
		if !strings.HasSuffix(text, chat.EmptyThink+c[len(c)-1].Content+"<|im_end|>\n") {
			t.Errorf("answer not after an empty think block: %q", text)
		}
		if strings.Count(text, "<think>") != 1 {
			t.Errorf("earlier turns kept think blocks: %q", text)
		}
	}
}

func TestReplaceWord(t *testing.T) {
	for _, tc := range []struct{ text, from, to, want string }{
		{"Let there be light: and there was light.", "light", "sun", "Let there be sun: and there was sun."},
		{"the lighted lamp gave light", "light", "sun", "the lighted lamp gave sun"},
		{"Light and light", "light", "sun", "Light and sun"},
		{"no match here", "light", "sun", "no match here"},
	} {
		if got := replaceWord(tc.text, tc.from, tc.to); got != tc.want {
			t.Errorf("replaceWord(%q, %q, %q) = %q, want %q", tc.text, tc.from, tc.to, got, tc.want)
		}
	}
	if got, want := words("And God saw the light, that it was good: and God"), []string{"And", "God", "saw", "the", "light", "that", "was", "good", "and"}; !slices.Equal(got, want) {
		t.Errorf("words = %q, want %q", got, want)
	}
}

func TestScrambled(t *testing.T) {
	p := passage{[]string{"a b c", "d e", "f g h i"}, " "}
	s := scrambled(rand.New(rand.NewPCG(1, 2)), p)
	var before, after []string
	for i := range p.items {
		if len(strings.Fields(s.items[i])) != len(strings.Fields(p.items[i])) {
			t.Errorf("item %d has %d words, want %d", i, len(strings.Fields(s.items[i])), len(strings.Fields(p.items[i])))
		}
		before, after = append(before, strings.Fields(p.items[i])...), append(after, strings.Fields(s.items[i])...)
	}
	slices.Sort(before)
	slices.Sort(after)
	if !slices.Equal(before, after) || s.sep != p.sep {
		t.Errorf("scrambled %+v is not a shuffle of %+v", s, p)
	}
}

// TestCopyExchanges checks that every copying answer is what its kind
// promises of the passage in the question.
func TestCopyExchanges(t *testing.T) {
	verses := []verse{
		{"Genesis", 1, 3, "And God said, Let there be light: and there was light."},
		{"Psalms", 23, 1, "The LORD is my shepherd; I shall not want."},
		{"Psalms", 23, 2, "He maketh me to lie down in green pastures: he leadeth me beside the still waters."},
		{"Psalms", 23, 3, "He restoreth my soul: he leadeth me in the paths of righteousness for his name's sake."},
		{"John", 11, 35, "Jesus wept."},
	}
	sayings := []saying{{1, "Mind precedes its objects. They are mind-governed and mind-made."}, {2, "Hatred never ceases through hatred."}}
	rng := rand.New(rand.NewPCG(3, 4))
	seen := map[string]int{}
	for range 400 {
		for _, scramble := range []float64{0, 0.5} {
			kind, x := copyExchange(rng, verses, sayings, scramble)
			seen[kind]++
			if scramble == 0 && strings.Contains(x.Question, "Let there be light") {
				t.Errorf("a copying task quotes the benchmark's chapter: %q", x.Question)
			}
			switch kind {
			case "repeat", "mention":
				if !strings.Contains(x.Question, x.Answer) || x.Answer == "" {
					t.Errorf("%s: answer %q not in the question %q", kind, x.Answer, x.Question)
				}
			case "summary":
				lead := slices.IndexFunc(summaryLeads, func(l string) bool { return strings.HasPrefix(x.Answer, l) })
				if lead < 0 || !strings.Contains(x.Question, strings.TrimPrefix(x.Answer, summaryLeads[lead])) {
					t.Errorf("summary: %q is not a lead-in and a quotation of %q", x.Answer, x.Question)
				}
			case "edit":
				if x.Answer == "" || strings.Contains(x.Question, x.Answer) {
					t.Errorf("edit: answer %q unchanged from the question %q", x.Answer, x.Question)
				}
			default:
				t.Fatalf("unknown kind %q", kind)
			}
		}
	}
	for _, kind := range []string{"repeat", "edit", "mention", "summary"} {
		if seen[kind] < 40 {
			t.Errorf("%d %s tasks in 800", seen[kind], kind)
		}
	}
}
