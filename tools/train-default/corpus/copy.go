package main

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
)

// Copying tasks teach the model to quote whatever passage the prompt gives
// it: repeat it, copy it with one word changed, quote the one verse that
// mentions a word, or sum it up with a verbatim quotation. The passages are
// drawn at random (one to six verses, from one chapter or from anywhere,
// sometimes sayings), so no passage is worth memorising; what is learnt is
// the copying. Replies that quote the prompt are also what prompt-lookup
// speculation drafts well.

// passageBanned keeps the chapter that bonsai's own speculation benchmark
// quotes out of the copying tasks, so that the benchmark measures copying a
// passage the model was never asked to copy.
func passageBanned(v verse) bool { return v.Book == "Genesis" && v.Chapter == 1 }

// passage is a few verses or sayings and how they are joined.
type passage struct {
	items []string
	sep   string
}

func (p passage) text() string { return strings.Join(p.items, p.sep) }

// randomPassage is one to six consecutive verses of a chapter (most often),
// verses from anywhere, or sayings.
func randomPassage(rng *rand.Rand, verses []verse, sayings []saying) passage {
	n := 1 + rng.IntN(6)
	var items []string
	switch r := rng.IntN(10); {
	case r < 6: // consecutive verses of one chapter
		i := rng.IntN(len(verses))
		for passageBanned(verses[i]) {
			i = rng.IntN(len(verses))
		}
		for j := i; j < len(verses) && len(items) < n && verses[j].Book == verses[i].Book && verses[j].Chapter == verses[i].Chapter; j++ {
			items = append(items, verses[j].Text)
		}
	case r < 8 || len(sayings) == 0: // verses from anywhere
		for len(items) < n {
			if v := verses[rng.IntN(len(verses))]; !passageBanned(v) {
				items = append(items, v.Text)
			}
		}
	default: // distinct sayings, at most three (they are long)
		for _, i := range rng.Perm(len(sayings))[:min(n, 3, len(sayings))] {
			items = append(items, sayings[i].Text)
		}
	}
	sep := " "
	if rng.IntN(10) < 3 {
		sep = "\n"
	}
	return passage{items, sep}
}

// scrambled shuffles the passage's words across its verses, each verse
// keeping its number of words.
func scrambled(rng *rand.Rand, p passage) passage {
	var all []string
	var counts []int
	for _, it := range p.items {
		ws := strings.Fields(it)
		all = append(all, ws...)
		counts = append(counts, len(ws))
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	items := make([]string, len(p.items))
	for i, n := range counts {
		items[i] = strings.Join(all[:n], " ")
		all = all[n:]
	}
	return passage{items, p.sep}
}

// withPassage puts the instruction before the passage (mostly) or after it.
func withPassage(rng *rand.Rand, instruction, after, text string) string {
	if rng.IntN(5) == 0 {
		return text + "\n\n" + after
	}
	return instruction + pick(rng, ":\n\n", ":\n\n", ":\n", ": ") + text
}

var wordRE = regexp.MustCompile(`[A-Za-z]+`)

// words are the passage's words of three letters or more, each once, in
// order of first appearance.
func words(text string) []string {
	var ws []string
	for _, w := range wordRE.FindAllString(text, -1) {
		if len(w) >= 3 && !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	return ws
}

// replaceWord replaces every whole-word occurrence of from (case as given).
func replaceWord(text, from, to string) string {
	return regexp.MustCompile(`\b`+regexp.QuoteMeta(from)+`\b`).ReplaceAllLiteralString(text, to)
}

// copyExchange is one copying task on a random passage, and its kind
// (repeat, edit, mention or summary). The editing task's new word comes from
// a random verse.
//
// With probability scramble the passage's words are shuffled across it (each
// verse keeping its length): a passage no memory of the texts can predict,
// which only copying answers.
func copyExchange(rng *rand.Rand, verses []verse, sayings []saying, scramble float64) (string, exchange) {
	p := randomPassage(rng, verses, sayings)
	if scramble > 0 && rng.Float64() < scramble {
		p = scrambled(rng, p)
	}
	text := p.text()
	switch r := rng.IntN(20); {
	case r < 6:
		return "repeat", repeatExchange(rng, text)
	case r < 11:
		ws := words(text)
		// Mostly lower-case words, as a person would name them.
		var lower []string
		for _, w := range ws {
			if w[0] >= 'a' && w[0] <= 'z' {
				lower = append(lower, w)
			}
		}
		if len(lower) > 0 && rng.IntN(5) > 0 {
			ws = lower
		}
		if len(ws) == 0 {
			return "repeat", repeatExchange(rng, text)
		}
		from := ws[rng.IntN(len(ws))]
		to := from
		for to == from {
			other := words(verses[rng.IntN(len(verses))].Text)
			if len(other) > 0 {
				to = strings.ToLower(other[rng.IntN(len(other))])
			}
		}
		if from[0] >= 'A' && from[0] <= 'Z' {
			to = strings.ToUpper(to[:1]) + to[1:]
		}
		q := func(s string) string {
			if rng.IntN(3) == 0 {
				return s
			}
			return "\"" + s + "\""
		}
		f, t := q(from), q(to)
		instr := pick(rng,
			"Copy this passage, changing "+f+" to "+t,
			"Rewrite this passage, replacing "+f+" with "+t,
			"Repeat this, but change every "+f+" to "+t,
			"Replace "+f+" with "+t+" in this passage",
			"Edit this text: change "+f+" to "+t,
			"Copy this out with "+t+" instead of "+f)
		after := pick(rng, "Copy the passage above, changing "+f+" to "+t+".", "Replace "+f+" with "+t+" in the text above.")
		return "edit", exchange{withPassage(rng, instr, after, text), replaceWord(text, from, to)}
	case r < 15 && len(p.items) >= 2:
		// A word that only one verse of the passage has.
		type unique struct {
			word string
			item int
		}
		var us []unique
		for i, it := range p.items {
			for _, w := range words(it) {
				if w[0] < 'a' || w[0] > 'z' || len(w) < 4 {
					continue
				}
				only := true
				for j, other := range p.items {
					if j != i && slices.Contains(words(other), w) {
						only = false
						break
					}
				}
				if only {
					us = append(us, unique{w, i})
				}
			}
		}
		if len(us) == 0 {
			return "summary", summaryExchange(rng, p)
		}
		u := us[rng.IntN(len(us))]
		instr := pick(rng,
			"Quote the verse of this passage that mentions "+u.word,
			"Quote the sentence of this passage that mentions \""+u.word+"\"",
			"Which verse of this passage speaks of "+u.word+"? Quote it",
			"Find the line about "+u.word+" in this passage and quote it",
			"From this passage, quote the part that mentions "+u.word)
		after := "Quote the verse above that mentions " + u.word + "."
		return "mention", exchange{withPassage(rng, instr, after, text), p.items[u.item]}
	default:
		return "summary", summaryExchange(rng, p)
	}
}

func repeatExchange(rng *rand.Rand, text string) exchange {
	instr := pick(rng,
		"Repeat this passage word for word",
		"Repeat this",
		"Copy this passage",
		"Say this back to me",
		"Repeat after me",
		"Quote this passage exactly",
		"Write this out again, word for word",
		"Copy this text exactly")
	after := pick(rng, "Repeat the passage above word for word.", "Copy that exactly.", "Say that back to me.")
	return exchange{withPassage(rng, instr, after, text), text}
}

// summaryLeads begin a summary; any of them is a right answer.
var summaryLeads = []string{"In short: ", "The key sentence is: ", "It comes down to this: ", "Its heart is this: "}

// summaryExchange sums a passage up as its opening sentence (verse or
// saying), quoted after a short lead-in: a summary a toy can give exactly.
func summaryExchange(rng *rand.Rand, p passage) exchange {
	instr := pick(rng,
		"Summarise this passage, quoting its key sentence",
		"Summarize this passage, quoting its key sentence",
		"Sum up this passage with a quotation",
		"What is this passage about? Quote its key line",
		"Give the gist of this passage, quoting it")
	after := pick(rng, "Summarise the passage above, quoting its key sentence.", "What is that about? Quote its key line.")
	return exchange{withPassage(rng, instr, after, p.text()), pick(rng, summaryLeads...) + p.items[0]}
}
