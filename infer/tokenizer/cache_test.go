package tokenizer

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freshTokenizer is the qwen2 tokenizer with an empty cache of its own, so
// that a test's words are not already cached by another test.
func freshTokenizer(t *testing.T) *Tokenizer {
	t.Helper()
	q := qwen2(t)
	return &Tokenizer{tokens: q.tokens, types: q.types, attrs: q.attrs, pieces: q.pieces, ids: q.ids, merges: q.merges,
		byteToken: q.byteToken, pre: q.pre, specials: q.specials, bos: q.bos, eos: q.eos, eot: q.eot, pad: q.pad,
		addBOS: q.addBOS, eog: q.eog, cache: map[string][]int32{}}
}

// A cached word must not keep the text it came from alive: a server that
// tokenized 7.8 MB requests kept all of each for one new word.
func TestWordCacheDoesNotPinTexts(t *testing.T) {
	tok := freshTokenizer(t)
	tok.Encode(" padding padding", false)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 8 {
		text := strings.Repeat(" padding", 1<<19) + " zyxwvu" + strings.Repeat("q", i+1) // 4 MB, one new word
		tok.Encode(text, false)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(tok)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("the heap grew by %d MB", grown>>20)
	if grown > 4<<20 {
		t.Errorf("8 texts of 4 MB, tokenized and dropped, left the heap %d MB larger", grown>>20)
	}
}

// The cache is bounded in bytes, not only in entries: long words would
// otherwise fill it with hundreds of megabytes.
func TestWordCacheBoundedInBytes(t *testing.T) {
	tok := freshTokenizer(t)
	var b strings.Builder
	for i := range 25000 {
		// One word each: letters only (a digit would cut it).
		b.WriteString(" " + strings.Repeat("q", 200) + strings.Map(func(r rune) rune { return 'a' + (r - '0') }, strconv.Itoa(i)))
		if b.Len() > 1<<20 {
			tok.Encode(b.String(), false)
			b.Reset()
		}
	}
	tok.Encode(b.String(), false)
	held := 0
	for k, ids := range tok.cache {
		held += len(k) + 4*len(ids)
	}
	if held > wordCacheBytes {
		t.Errorf("the word cache holds %d MiB, more than its %d MiB", held>>20, wordCacheBytes>>20)
	}
}

// One huge word costs memory linear in its size and small, not the
// hundreds of bytes a byte that one BPE pass over it holds (an 8 MB word
// took 1.3 GB and 20 s).
func TestHugeWordBoundedCost(t *testing.T) {
	tok := freshTokenizer(t)
	word := strings.Repeat("abcdefghij", 200_000) // 2 MB of letters: one pre-token
	// Collect garbage promptly, so that the heap in use is what the
	// encoding holds.
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	peak := base.HeapInuse
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}()
	ids := tok.Encode(word, false)
	close(stop)
	<-sampled
	if got := tok.Decode(ids); got != word {
		t.Fatalf("decoding gives %d bytes, not the word's %d", len(got), len(word))
	}
	// The ids, their slice's growth and the garbage take about 16 bytes a
	// byte of text; one pass over the whole word held over 150.
	grown := peak - base.HeapInuse
	t.Logf("the heap grew by %d MB", grown>>20)
	if grown > 64*uint64(len(word)) {
		t.Errorf("encoding a %d MB word took %d MB of heap", len(word)>>20, grown>>20)
	}
	// Pieces encode as one pass would, away from the cuts.
	short := strings.Repeat("abcdefghij", 300)
	if got, want := tok.Encode(short, false), tok.bpeWord(short, nil); !equalIDs(got, want) {
		t.Errorf("a %d-byte word: %v, one pass %v", len(short), got, want)
	}
}
