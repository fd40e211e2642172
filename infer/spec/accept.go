package spec

import "github.com/bonsai-chat/bonsai/infer/sample"

// Speculative rejection sampling (Leviathan et al., Chen et al.): a token x
// drafted from the distribution q is accepted with probability
// min(1, p(x)/q(x)), p being the target's; on rejection the token is drawn
// from the residual norm(max(0, p − q)). Whatever q is, the token that
// comes out is distributed as p:
//
//	P(x) = q(x)·min(1, p(x)/q(x)) + (1 − Σ_y min(p(y), q(y)))·max(0, p(x) − q(x))/Σ_y max(0, p(y) − q(y))
//	     = min(p(x), q(x)) + max(0, p(x) − q(x)) = p(x)
//
// since Σ min(p, q) + Σ max(0, p − q) = Σ p = 1.
//
// For a drafter that proposes one token for sure (prompt lookup, or any
// drafter at temperature 0) q is a point mass on x: then x is accepted with
// probability p(x) and the residual is p without x. Drawing y from p and
// accepting x when y = x is the same rule, and is what the decoder does:
// it draws exactly as plain sampling does, so a seeded run gives plain
// decoding's tokens.

// acceptDraft decides a token x drafted from q (by token id) against p,
// using u to accept and v to draw from the residual (both uniform in
// [0, 1)). It returns the token to emit and whether it is x accepted.
func acceptDraft(p []sample.Prob, q map[int32]float32, x int32, u, v float64, scratch []sample.Prob) (int32, bool) {
	px, qx := probOf(p, x), q[x]
	if qx > 0 && u*float64(qx) < float64(px) {
		return x, true
	}
	r := scratch[:0]
	var sum float64
	for _, t := range p {
		if d := t.P - q[t.ID]; d > 0 {
			r = append(r, sample.Prob{ID: t.ID, P: d})
			sum += float64(d)
		}
	}
	if sum == 0 {
		// p ≤ q everywhere means p = q: the draft is always accepted, so
		// only rounding reaches here; p itself is the right law.
		return sample.Pick(p, v), false
	}
	for i := range r {
		r[i].P = float32(float64(r[i].P) / sum)
	}
	return sample.Pick(r, v), false
}

// probOf is the probability of id in d (0 outside its support).
func probOf(d []sample.Prob, id int32) float32 {
	for _, t := range d {
		if t.ID == id {
			return t.P
		}
	}
	return 0
}

// Rejection decides drafted tokens that come with the distributions they
// were drawn from (a draft model's) by the rule above; its buffers are
// reused from one call to the next. The zero value is ready.
type Rejection struct {
	dist, resid []sample.Prob
	q           map[int32]float32
}

// Decide is the token that follows when x, drafted from q, is put to the
// target's logits as smp samples them (smp's random stream draws; it
// accepts nothing): x, true when accepted, else a token from the residual.
func (r *Rejection) Decide(smp *sample.Sampler, logits []float32, x int32, q []sample.Prob) (int32, bool) {
	r.dist = smp.Dist(logits, r.dist)
	if r.q == nil {
		r.q = map[int32]float32{}
	}
	clear(r.q)
	for _, t := range q {
		r.q[t.ID] = t.P
	}
	return acceptDraft(r.dist, r.q, x, smp.Float64(), smp.Float64(), r.resid)
}
