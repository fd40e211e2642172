package serve_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"

	ollama "github.com/ollama/ollama/api"
	oai "github.com/openai/openai-go/v3"

	"github.com/bonsai-chat/bonsai/infer"
)

// refEmbedding is the embedding computed apart from the server: the
// model's final-norm hidden states of the tokens (infer.Model.Hidden, in
// passes of 64 as the server's), their mean, L2-normalised.
func refEmbedding(t *testing.T, tokens []int32) []float64 {
	t.Helper()
	f := testFile(t)
	defer f.Close()
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Threads: 2, Context: 384, Batch: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	E := m.Hparams.Embed
	sum := make([]float64, E)
	rows := make([]float32, 64*E)
	for start := 0; start < len(tokens); start += 64 {
		chunk := tokens[start:min(start+64, len(tokens))]
		if err := m.Hidden(chunk, start, 0, 0, rows); err != nil {
			t.Fatal(err)
		}
		for i := range chunk {
			for c := range E {
				sum[c] += float64(rows[i*E+c])
			}
		}
	}
	var norm float64
	for c := range sum {
		sum[c] /= float64(len(tokens))
		norm += sum[c] * sum[c]
	}
	for c := range sum {
		sum[c] /= math.Sqrt(norm)
	}
	return sum
}

func distance(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

func norm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

// A text long enough for three passes of the test server's batch of 64.
var longText = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 14)

func TestEmbeddingsAreThePooledHiddenState(t *testing.T) {
	s := startServer(t, "", 2)
	c := s.client()
	ctx := context.Background()
	resp, err := c.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: testModel,
		Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello world", longText, "hello world", "hello there"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 4 || resp.Object != "list" {
		t.Fatalf("%d embeddings", len(resp.Data))
	}
	for i, d := range resp.Data {
		if len(d.Embedding) != 128 || d.Index != int64(i) || math.Abs(norm(d.Embedding)-1) > 1e-5 {
			t.Errorf("embedding %d: %d values of norm %g, index %d", i, len(d.Embedding), norm(d.Embedding), d.Index)
		}
	}
	hello, long := resp.Data[0].Embedding, resp.Data[1].Embedding
	if distance(hello, resp.Data[2].Embedding) != 0 {
		t.Error("the same input twice gave different vectors")
	}
	if distance(hello, resp.Data[3].Embedding) < 1e-3 || distance(hello, long) < 1e-3 {
		t.Error("different inputs gave the same vector")
	}
	helloToks := s.model.Tok.Encode("hello world", true)
	longToks := s.model.Tok.Encode(longText, true)
	if len(longToks) <= 128 {
		t.Fatalf("the long text is %d tokens: not three passes", len(longToks))
	}
	if resp.Usage.PromptTokens != int64(2*len(helloToks)+len(longToks)+len(s.model.Tok.Encode("hello there", true))) {
		t.Errorf("usage %+v", resp.Usage)
	}
	for name, c := range map[string]struct {
		got  []float64
		toks []int32
	}{"short": {hello, helloToks}, "long": {long, longToks}} {
		if d := distance(c.got, refEmbedding(t, c.toks)); d > 1e-5 {
			t.Errorf("%s: %.3g from the mean of Model.Hidden's rows", name, d)
		}
	}

	// Token ids are the text they spell; base64 the same floats.
	ids := make([]int64, len(helloToks))
	for i, id := range helloToks {
		ids[i] = int64(id)
	}
	byIDs, err := c.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: testModel, Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{ids}}})
	if err != nil {
		t.Fatal(err)
	}
	if distance(byIDs.Data[0].Embedding, hello) != 0 {
		t.Error("token ids embed differently from their text")
	}
	r := post(t, s, "/v1/embeddings", `{"input":"hello world","encoding_format":"base64"}`)
	var b64 struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.body), &b64); err != nil || len(b64.Data) != 1 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 4*128 {
		t.Fatalf("base64 of %d bytes, %v", len(raw), err)
	}
	for i := range 128 {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); v != float32(hello[i]) {
			t.Fatalf("base64 value %d is %g, the float %g", i, v, hello[i])
		}
	}
	short, err := c.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: testModel, Dimensions: oai.Int(16), Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String("hello world")}})
	if err != nil {
		t.Fatal(err)
	}
	if v := short.Data[0].Embedding; len(v) != 16 || math.Abs(norm(v)-1) > 1e-5 {
		t.Errorf("16 dimensions: %d of norm %g", len(v), norm(v))
	}

	// ollama's /api/embed: the same vectors; the legacy /api/embeddings
	// the same direction, not normalised.
	oc := s.ollama(t)
	emb, err := oc.Embed(ctx, &ollama.EmbedRequest{Model: testModel, Input: []string{"hello world", "hello there"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Embeddings) != 2 || emb.PromptEvalCount == 0 {
		t.Fatalf("/api/embed: %+v", emb)
	}
	for i, want := range [][]float64{hello, resp.Data[3].Embedding} {
		same := len(emb.Embeddings[i]) == len(want)
		for j, v := range emb.Embeddings[i] {
			same = same && v == float32(want[j]) // both are the server's float32s
		}
		if !same {
			t.Errorf("/api/embed %d differs from /v1/embeddings", i)
		}
	}
	legacy, err := oc.Embeddings(ctx, &ollama.EmbeddingRequest{Model: testModel, Prompt: "hello world"})
	if err != nil {
		t.Fatal(err)
	}
	n := norm(legacy.Embedding)
	scaled := make([]float64, len(legacy.Embedding))
	for i, v := range legacy.Embedding {
		scaled[i] = v / n
	}
	if len(legacy.Embedding) != 128 || math.Abs(n-1) < 1e-3 || distance(scaled, hello) > 1e-6 {
		t.Errorf("/api/embeddings: %d values of norm %g, %.3g from the direction of /v1/embeddings", len(legacy.Embedding), n, distance(scaled, hello))
	}
}

// An embedding runs between the steps of a generation without changing
// it, and the slot it used keeps its tokens' cache for a later prompt.
func TestEmbeddingsBesideGenerations(t *testing.T) {
	s := startServer(t, "", 2)
	c := s.client()
	ctx := context.Background()
	p := greedy(oai.UserMessage("Tell me a long story"))
	p.MaxTokens = oai.Int(60)
	alone, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	want := alone.Choices[0].Message.Content

	var got strings.Builder
	streamed := c.Chat.Completions.NewStreaming(ctx, p)
	var wg sync.WaitGroup
	first := true
	for streamed.Next() {
		ch := streamed.Current()
		if len(ch.Choices) > 0 {
			got.WriteString(ch.Choices[0].Delta.Content)
		}
		if first {
			first = false
			wg.Go(func() {
				for range 3 {
					if _, err := c.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: testModel, Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String(longText)}}); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
	wg.Wait()
	if err := streamed.Err(); err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Errorf("with embeddings beside it: %q\nalone: %q", got.String(), want)
	}

	// One slot: a completion, then an embedding of its prompt's start in
	// the same slot, then the completion again, which reuses the
	// embedding's cache: the same text.
	one := startServer(t, "", 1)
	oc := one.client()
	complete := func() string {
		r, err := oc.Completions.New(ctx, oai.CompletionNewParams{Model: testModel, Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String(longText + "And then")},
			MaxTokens: oai.Int(16), Temperature: oai.Float(0)})
		if err != nil {
			t.Fatal(err)
		}
		return r.Choices[0].Text
	}
	before := complete()
	if _, err := oc.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: testModel, Input: oai.EmbeddingNewParamsInputUnion{OfString: oai.String(longText)}}); err != nil {
		t.Fatal(err)
	}
	cachedBefore := metricValue(t, get(t, one, "/metrics", "").body, "bonsai_prompt_tokens_cached_total")
	if after := complete(); after != before {
		t.Errorf("after an embedding of its start: %q, before %q", after, before)
	}
	cached := metricValue(t, get(t, one, "/metrics", "").body, "bonsai_prompt_tokens_cached_total") - cachedBefore
	if cached < float64(len(one.model.Tok.Encode(longText, true))-2) {
		t.Errorf("the completion reused %g tokens of the embedding's cache", cached)
	}
}

func TestEmbeddingsRefusals(t *testing.T) {
	s := startServer(t, "", 1)
	for _, c := range []struct{ name, body, says string }{
		{"no input", `{"model":"tiny"}`, "input must not be empty"},
		{"an empty string", `{"input":""}`, "is empty"},
		{"a token outside the vocabulary", `{"input":[1,2,99999999]}`, "outside the vocabulary"},
		{"a negative token", `{"input":[[-1]]}`, "outside the vocabulary"},
		{"too many inputs", `{"input":[` + strings.TrimSuffix(strings.Repeat(`"a",`, 2049), ",") + `]}`, "at most 2048"},
		{"an object", `{"input":{"a":1}}`, "input must be"},
		{"too long", `{"input":"` + strings.Repeat("word ", 600) + `"}`, "prompt tokens"},
		{"too many dimensions", `{"input":"a","dimensions":129}`, "dimensions must be between 1 and the model's width, 128"},
		{"a bad encoding", `{"input":"a","encoding_format":"hex"}`, "encoding_format"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, s, "/v1/embeddings", c.body)
			if msg, _, _ := apiError(t, r); r.status != 400 || !strings.Contains(msg, c.says) {
				t.Errorf("%d %s", r.status, r.body)
			}
		})
	}
	// ollama truncates by default, and refuses with truncate: false.
	long := `"` + strings.Repeat("word ", 600) + `"`
	if r := post(t, s, "/api/embed", `{"model":"tiny","input":`+long+`}`); r.status != 200 {
		t.Errorf("truncated: %d %s", r.status, r.body)
	}
	if r := post(t, s, "/api/embed", `{"model":"tiny","truncate":false,"input":`+long+`}`); r.status != 400 || !strings.Contains(r.body, `"error"`) {
		t.Errorf("not truncated: %d %s", r.status, r.body)
	}
}
