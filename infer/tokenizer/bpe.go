package tokenizer

import "container/heap"

// mergeKey packs a pair of adjacent token ids.
func mergeKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// merge is what a ranked pair turns into.
type merge struct {
	rank   int32 // line number in the merges list: lower merges first
	result int32 // the token spelled left+right
}

// symbol is one node of the doubly linked list a word is merged in.
type symbol struct {
	id         int32
	prev, next int // -1 at the ends
}

// candidate is an adjacent pair that had a merge rank when it was pushed; it is
// stale if either side has changed since.
type candidate struct {
	rank        int32
	left, right int // symbol indexes
	leftID      int32
	rightID     int32
}

type candidates []candidate

func (c candidates) Len() int { return len(c) }
func (c candidates) Less(i, j int) bool {
	// Lowest rank first; on ties the leftmost pair, as llama.cpp and
	// Hugging Face do.
	if c[i].rank != c[j].rank {
		return c[i].rank < c[j].rank
	}
	return c[i].left < c[j].left
}
func (c candidates) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *candidates) Push(x any)   { *c = append(*c, x.(candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// bpeWord merges the byte tokens of one pre-token and appends the resulting
// ids to out.
func (t *Tokenizer) bpeWord(word string, out []int32) []int32 {
	if len(word) == 1 {
		if id := t.byteToken[word[0]]; id != NoToken {
			out = append(out, id)
		}
		return out
	}
	syms := make([]symbol, len(word))
	for i := 0; i < len(word); i++ {
		syms[i] = symbol{id: t.byteToken[word[i]], prev: i - 1, next: i + 1}
	}
	syms[len(syms)-1].next = -1

	queue := make(candidates, 0, len(word))
	push := func(left int) {
		if left < 0 {
			return
		}
		right := syms[left].next
		if right < 0 {
			return
		}
		m, ok := t.merges[mergeKey(syms[left].id, syms[right].id)]
		if !ok {
			return
		}
		heap.Push(&queue, candidate{rank: m.rank, left: left, right: right, leftID: syms[left].id, rightID: syms[right].id})
	}
	for i := 0; i+1 < len(syms); i++ {
		push(i)
	}
	for queue.Len() > 0 {
		c := heap.Pop(&queue).(candidate)
		l, r := &syms[c.left], &syms[c.right]
		if l.id != c.leftID || r.id != c.rightID || l.next != c.right {
			continue // one side was merged away since this pair was queued
		}
		l.id = t.merges[mergeKey(c.leftID, c.rightID)].result
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		r.id = -1 // dead: never equal to a queued id
		push(l.prev)
		push(c.left)
	}
	for i := 0; i >= 0; i = syms[i].next {
		if syms[i].id != NoToken { // a byte the vocabulary has no token for
			out = append(out, syms[i].id)
		}
	}
	return out
}
