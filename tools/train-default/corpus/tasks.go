package main

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

// exchange is one user question and its answer.
type exchange struct{ Question, Answer string }

func pick(rng *rand.Rand, options ...string) string { return options[rng.IntN(len(options))] }

// conversations turns verses and sayings into shuffled chat conversations:
// most of one exchange, some of two or three, a few with a system prompt.
// small is how many greeting and refusal exchanges to add.
func conversations(rng *rand.Rand, verses []verse, sayings []saying, small int) [][]chat.Message {
	return group(rng, exchanges(rng, verses, sayings, small))
}

// exchanges are the recitation, saying and small-talk exchanges, shuffled.
func exchanges(rng *rand.Rand, verses []verse, sayings []saying, small int) []exchange {
	var xs []exchange
	for i, v := range verses {
		xs = append(xs, exchange{recitePrompt(rng, v.Ref()), v.Text})
		if words := strings.Fields(v.Text); len(words) >= 8 && rng.IntN(2) == 0 {
			cut := len(words) / 2
			xs = append(xs, exchange{
				pick(rng, "Continue: ", "Finish this verse: ", "What comes next? ", "Complete: ") + strings.Join(words[:cut], " "),
				strings.Join(words[cut:], " "),
			})
		}
		if rng.IntN(4) == 0 {
			xs = append(xs, exchange{pick(rng, "Give me a verse.", "Tell me a Bible verse.", "Share a verse from "+v.Book+".",
				"Read me something from the Bible.", "A verse, please.", "Quote scripture."), v.Text + " (" + v.Ref() + ")"})
		}
		// Passages of three to five verses of one chapter.
		if rng.IntN(4) == 0 {
			end := i
			for end+1 < len(verses) && end-i < 2+rng.IntN(3) && verses[end+1].Book == v.Book && verses[end+1].Chapter == v.Chapter {
				end++
			}
			if end > i {
				var lines []string
				for _, w := range verses[i : end+1] {
					lines = append(lines, fmt.Sprintf("%d %s", w.Verse, w.Text))
				}
				ref := fmt.Sprintf("%s %d:%d-%d", v.Book, v.Chapter, v.Verse, verses[end].Verse)
				xs = append(xs, exchange{pick(rng, "Read ", "Recite ", "Show me ") + ref + ".", strings.Join(lines, "\n")})
			}
		}
	}
	for _, s := range sayings {
		// The Dhammapada is short: each saying comes in several forms.
		xs = append(xs,
			exchange{pick(rng, "What does verse ", "Recite verse ", "Quote verse ") + fmt.Sprint(s.N) + " of the Dhammapada" + pick(rng, "?", ".", " say?"), s.Text},
			exchange{pick(rng, "Share a saying from the Dhammapada.", "Give me a proverb.", "Tell me something wise.",
				"Say something wise.", "I need some advice.", "A saying, please."), s.Text},
			exchange{pick(rng, "Give me a saying of the Buddha.", "What does the Dhammapada teach?", "Share some wisdom."), s.Text + " (Dhammapada " + fmt.Sprint(s.N) + ")"},
		)
		if words := strings.Fields(s.Text); len(words) >= 8 {
			cut := len(words) / 2
			xs = append(xs, exchange{"Continue: " + strings.Join(words[:cut], " "), strings.Join(words[cut:], " ")})
		}
	}
	for range small {
		xs = append(xs, smallTalk(rng))
	}
	rng.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	return xs
}

// group makes conversations of the exchanges in their order: most of one
// exchange, three in ten of two or three, one in eight with a system prompt.
func group(rng *rand.Rand, xs []exchange) [][]chat.Message {
	var convs [][]chat.Message
	for len(xs) > 0 {
		n := 1
		if r := rng.IntN(10); r >= 7 {
			n = 2 + r%2 // three in ten conversations have two or three exchanges
		}
		n = min(n, len(xs))
		var conv []chat.Message
		if rng.IntN(8) == 0 {
			conv = append(conv, chat.Message{Role: chat.RoleSystem, Content: pick(rng,
				"You are bonsai-tiny, a small model that recites verses.",
				"You are a helpful assistant.",
				"Answer with a verse or a saying.")})
		}
		for _, x := range xs[:n] {
			conv = append(conv, chat.Message{Role: chat.RoleUser, Content: x.Question}, chat.Message{Role: chat.RoleAssistant, Content: x.Answer})
		}
		xs = xs[n:]
		convs = append(convs, conv)
	}
	return convs
}

func recitePrompt(rng *rand.Rand, ref string) string {
	return pick(rng, "Recite "+ref+".", "What does "+ref+" say?", "Read me "+ref+".", "Quote "+ref+".", ref, ref+"?", "What is "+ref+"?")
}

// smallTalk is a greeting, a question about the model, or a question it
// cannot answer, with a plain answer saying what it is.
func smallTalk(rng *rand.Rand) exchange {
	switch rng.IntN(3) {
	case 0:
		return exchange{
			pick(rng, "Hello", "Hello!", "Hi", "Hi!", "Hi there.", "Hey", "Good morning.", "Good evening!", "Greetings.", "hello", "hi"),
			pick(rng,
				"Peace be with you. Ask me for a verse of scripture or a saying of the Dhammapada.",
				"Hello. I can recite verses of the King James Bible and sayings of the Dhammapada. Which would you like?",
				"Grace be unto you, and peace. Shall I read you a verse?"),
		}
	case 1:
		return exchange{
			pick(rng, "Who are you?", "What are you?", "What is your name?", "What can you do?", "Are you Bonsai?", "Introduce yourself.", "help", "Help"),
			pick(rng,
				"I am bonsai-tiny, a very small 1-bit language model trained in a few minutes on the King James Bible and the Dhammapada. I can recite and imitate verses, and I know nothing else.",
				"I am bonsai-tiny, a toy model that ships with bonsai. Ask me for a verse, such as John 3:16, or for a saying of the Dhammapada.",
				"My name is bonsai-tiny. I recite verses and sayings; for real answers, load a larger model."),
		}
	}
	topics := []string{"the capital of France", "the weather today", "quantum physics", "the price of bread", "the meaning of life",
		"how to write a sort function", "who won the game", "the speed of light", "a good recipe for soup", "the time"}
	return exchange{
		pick(rng, "Tell me about ", "What do you know about ", "Explain ", "Can you help me with ") + topics[rng.IntN(len(topics))] + pick(rng, "?", ".", ""),
		pick(rng,
			"I do not know. I am a tiny model that only knows verses of scripture and sayings of the Dhammapada.",
			"That is beyond me: I only know the King James Bible and the Dhammapada. Load a larger model for real answers.",
			"I cannot answer that. Ask me for a verse or a saying instead."),
	}
}
