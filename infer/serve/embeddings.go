package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/bonsai-chat/bonsai/infer/openai"
)

// Embeddings (POST /v1/embeddings, ollama's /api/embed and
// /api/embeddings) are the mean of the loaded model's final-norm hidden
// states over the input's tokens, as llama-server --embeddings --pooling
// mean computes them: each input runs as a sequence of its own in a free
// slot (slots.Scheduler.Embed), tokenized as llama-server does (special
// tokens parsed, the BOS first where the model wants one). /v1/embeddings
// and /api/embed return them L2-normalised (llama-server's default
// embd_normalize 2, ollama's normalize); the legacy /api/embeddings, as
// ollama's, does not.

// maxEmbedInputs bounds the inputs of one request (OpenAI's limit).
const maxEmbedInputs = 2048

// embedInput is input on the wire: a string, an array of strings, an
// array of token ids (one input), or an array of arrays of token ids.
type embedInput struct {
	texts  []string
	tokens [][]int32
}

func (e *embedInput) UnmarshalJSON(b []byte) error {
	*e = embedInput{}
	return openai.DecodeStringOr(b, func() {}, func(s string) { e.texts = []string{s} }, e.decodeArray)
}

// decodeArray decodes an array of texts, of token ids (one input) or of
// arrays of token ids into e.
func (e *embedInput) decodeArray(b []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return errEmbedInput
	}
	if len(items) > maxEmbedInputs {
		return fmt.Errorf("input holds %d items, at most %d", len(items), maxEmbedInputs)
	}
	if len(items) == 0 {
		return nil
	}
	switch items[0][0] {
	case '"':
		return json.Unmarshal(b, &e.texts)
	case '[':
		if err := json.Unmarshal(b, &e.tokens); err != nil {
			return errEmbedInput
		}
		return nil
	}
	var ids []int32
	if err := json.Unmarshal(b, &ids); err != nil {
		return errEmbedInput
	}
	e.tokens = [][]int32{ids}
	return nil
}

var errEmbedInput = errors.New("input must be a string, an array of strings, an array of token ids or an array of arrays of token ids")

func (e embedInput) count() int { return len(e.texts) + len(e.tokens) }

// embedAll embeds each input; truncate cuts an input longer than a slot
// (ollama's default) instead of refusing it. gone says the client left.
func (s *Server) embedAll(ctx context.Context, m *Model, in embedInput, truncate bool) (vecs [][]float32, tokens int, aerr *apiError, gone bool) {
	n := m.Sched.Context()
	for i := range in.count() {
		var toks []int32
		if i < len(in.texts) {
			text := in.texts[i]
			if l := len(text) / m.maxPiece; l >= n && !truncate {
				return nil, 0, tooLong(l, m), false
			}
			release, aerr := s.tokenizing(ctx)
			if aerr != nil {
				return nil, 0, aerr, ctx.Err() != nil
			}
			toks = m.Tok.Encode(text, true)
			release()
			if m.Tok.AddBOS() && m.Tok.BOS() >= 0 {
				toks = append([]int32{m.Tok.BOS()}, toks...)
			}
		} else {
			toks = in.tokens[i-len(in.texts)]
			for _, id := range toks {
				if id < 0 || int(id) >= m.Tok.Vocab() {
					return nil, 0, badRequest("input", "token %d is outside the vocabulary of %d", id, m.Tok.Vocab()), false
				}
			}
		}
		if len(toks) == 0 {
			return nil, 0, badRequest("input", "input %d is empty: there is nothing to embed", i), false
		}
		if len(toks) > n {
			if !truncate {
				return nil, 0, tooLong(len(toks), m), false
			}
			toks = toks[:n]
		}
		vec, err := m.Sched.Embed(ctx, toks)
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, nil, true
			}
			return nil, 0, submitError(err), false
		}
		for _, v := range vec {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, 0, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: "the model's hidden state is not finite"}, false
			}
		}
		vecs = append(vecs, vec)
		tokens += len(toks)
	}
	return vecs, tokens, nil, false
}

// normalize scales v to unit length (L2), as llama-server's
// common_embd_normalize(…, 2) does: a zero vector stays zero.
func normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return v
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return v
}

// shorten keeps a vector's first d values, normalised again (OpenAI's and
// ollama's dimensions); 0 keeps them all.
func shorten(vecs [][]float32, d int) {
	if d <= 0 {
		return
	}
	for i, v := range vecs {
		if d < len(v) {
			vecs[i] = normalize(v[:d])
		}
	}
}

func checkDimensions(d, width int) *apiError {
	if d < 0 || d > width {
		return badRequest("dimensions", "dimensions must be between 1 and the model's width, %d, not %d", width, d)
	}
	return nil
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request, m *Model) {
	var req struct {
		Model          string     `json:"model"`
		Input          embedInput `json:"input"`
		EncodingFormat string     `json:"encoding_format"`
		Dimensions     int        `json:"dimensions"`
	}
	if !s.decode(w, r, &req) {
		return
	}
	if !m.answersTo(req.Model) {
		notFound(m, req.Model).write(w)
		return
	}
	if req.Input.count() == 0 {
		badRequest("input", "input must not be empty").write(w)
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		badRequest("encoding_format", "encoding_format must be float or base64, not %q", req.EncodingFormat).write(w)
		return
	}
	if aerr := checkDimensions(req.Dimensions, m.model.Hparams.Embed); aerr != nil {
		aerr.write(w)
		return
	}
	vecs, tokens, aerr, gone := s.embedAll(r.Context(), m, req.Input, false)
	if gone {
		return
	}
	if aerr != nil {
		aerr.write(w)
		return
	}
	for _, v := range vecs {
		normalize(v)
	}
	shorten(vecs, req.Dimensions)
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]item, len(vecs))
	for i, v := range vecs {
		data[i] = item{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(b)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": m.ID,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}

func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request, m *Model) {
	start := time.Now()
	var req struct {
		Model      string     `json:"model"`
		Input      embedInput `json:"input"`
		Truncate   *bool      `json:"truncate"`
		Dimensions int        `json:"dimensions"`
	}
	if aerr := s.decodeBody(w, r, &req); aerr != nil {
		ollamaFail(aerr, w)
		return
	}
	if !m.answersToOllama(req.Model) {
		ollamaFail(&apiError{status: http.StatusNotFound, msg: fmt.Sprintf("model '%s' not found", req.Model)}, w)
		return
	}
	if aerr := checkDimensions(req.Dimensions, m.model.Hparams.Embed); aerr != nil {
		ollamaFail(aerr, w)
		return
	}
	vecs, tokens, aerr, gone := s.embedAll(r.Context(), m, req.Input, req.Truncate == nil || *req.Truncate)
	if gone {
		return
	}
	if aerr != nil {
		ollamaFail(aerr, w)
		return
	}
	for _, v := range vecs {
		normalize(v)
	}
	shorten(vecs, req.Dimensions)
	if vecs == nil {
		vecs = [][]float32{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"model": req.Model, "embeddings": vecs,
		"total_duration": int64(time.Since(start)), "prompt_eval_count": tokens})
}

// ollamaEmbeddings is the legacy /api/embeddings: one prompt, the pooled
// vector not normalised.
func (s *Server) ollamaEmbeddings(w http.ResponseWriter, r *http.Request, m *Model) {
	var req struct {
		Model  string `json:"model"`
		Prompt string `json:"prompt"`
	}
	if aerr := s.decodeBody(w, r, &req); aerr != nil {
		ollamaFail(aerr, w)
		return
	}
	if !m.answersToOllama(req.Model) {
		ollamaFail(&apiError{status: http.StatusNotFound, msg: fmt.Sprintf("model '%s' not found", req.Model)}, w)
		return
	}
	if req.Prompt == "" {
		writeJSON(w, http.StatusOK, map[string][]float32{"embedding": {}})
		return
	}
	vecs, _, aerr, gone := s.embedAll(r.Context(), m, embedInput{texts: []string{req.Prompt}}, false)
	if gone {
		return
	}
	if aerr != nil {
		ollamaFail(aerr, w)
		return
	}
	writeJSON(w, http.StatusOK, map[string][]float32{"embedding": vecs[0]})
}
