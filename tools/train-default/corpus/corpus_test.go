package main

import (
	"math/rand/v2"
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
