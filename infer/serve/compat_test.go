package serve_test

import (
	"encoding/json"
	"testing"
)

// Issue 34 item 1: a request naming any model ("gpt-4o", a case variant)
// is answered by the loaded model, and the reply names the model that
// answered, as llama-server's does; the model list keeps the loaded id.
func TestAnyModelNameGetsTheLoadedModel(t *testing.T) {
	s := startServer(t, "", 1)
	for _, name := range []string{"gpt-4o", "gpt-3.5-turbo", "TINY", "tiny", ""} {
		for _, c := range []struct{ path, body string }{
			{"/v1/chat/completions", `{"model":"` + name + `","max_tokens":2,"messages":[{"role":"user","content":"x"}]}`},
			{"/v1/completions", `{"model":"` + name + `","max_tokens":2,"prompt":"x"}`},
		} {
			r := post(t, s, c.path, c.body)
			var resp struct {
				Model string `json:"model"`
			}
			if err := json.Unmarshal([]byte(r.body), &resp); err != nil || r.status != 200 || resp.Model != testModel {
				t.Errorf("%s model %q: %d %.200s", c.path, name, r.status, r.body)
			}
		}
	}
	r := get(t, s, "/v1/models", "")
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list.Data) != 1 || list.Data[0].ID != testModel {
		t.Errorf("/v1/models: %s", r.body)
	}
}
