// Package parity checks bonsai against llama.cpp, the reference it must
// match: the same tokens for a prompt, the same greedy continuation, and the
// same logits within rounding. llama.cpp runs through node-llama-cpp (the
// "oracle", tools/oracle). Its answers for the synthetic models of this
// package are stored as golden files in testdata/, so the tests run without
// it; where the oracle is installed (always in CI) they also ask it live and
// check that the goldens are still what llama.cpp says.
package parity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// oracleDir is tools/oracle, relative to this package.
var oracleDir = filepath.Join("..", "..", "tools", "oracle")

// inCI is true under CI (CI=true), where a missing oracle fails the tests
// that need it instead of skipping them.
var inCI = os.Getenv("CI") == "true"

var (
	oracleOnce sync.Once
	oracleErr  error
)

// oracleMissing says why the oracle cannot run here, or nil.
func oracleMissing() error {
	oracleOnce.Do(func() {
		if _, err := exec.LookPath("node"); err != nil {
			oracleErr = fmt.Errorf("node is not installed: %w", err)
			return
		}
		for _, p := range []string{"oracle.mjs", "node_modules/node-llama-cpp/package.json", "node_modules/@node-llama-cpp/linux-x64/package.json"} {
			if _, err := os.Stat(filepath.Join(oracleDir, p)); err != nil {
				oracleErr = fmt.Errorf("the oracle is not installed (%v): run `npm ci --omit=optional` in tools/oracle", err)
				return
			}
		}
	})
	return oracleErr
}

// requireOracle skips the test when the oracle is missing, or fails it in CI.
func requireOracle(t *testing.T) {
	t.Helper()
	if err := oracleMissing(); err != nil {
		if inCI {
			t.Fatalf("CI=true but the llama.cpp oracle cannot run: %v", err)
		}
		t.Skipf("skipping the live llama.cpp comparison: %v", err)
	}
}

// oracleRun is what oracle.mjs prints for a generation.
type oracleRun struct {
	PromptTokens []int32 `json:"prompt_tokens"`
	Tokens       []int32 `json:"tokens"`
	Steps        []step  `json:"steps"`
}

// step holds llama.cpp's largest logits for one generated token, highest
// first: Top[i] = [token id, logit].
type step struct {
	Top [][2]float64 `json:"top"`
}

// margin is the gap between the best and the second-best logit.
func (s step) margin() float64 {
	if len(s.Top) < 2 {
		return 0
	}
	return s.Top[0][1] - s.Top[1][1]
}

func runOracle(args ...string) ([]byte, error) {
	script, err := filepath.Abs(filepath.Join(oracleDir, "oracle.mjs"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir = oracleDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("oracle %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// oracleGenerate asks llama.cpp for n greedy tokens after prompt and the top
// logits of each step; extra are further oracle.mjs flags (cache types).
func oracleGenerate(model, prompt string, n, top int, extra ...string) (oracleRun, error) {
	out, err := runOracle(append([]string{"--model=" + model, "--prompt=" + prompt, "--n", strconv.Itoa(n), "--top", strconv.Itoa(top)}, extra...)...)
	if err != nil {
		return oracleRun{}, err
	}
	var r oracleRun
	if err := json.Unmarshal(out, &r); err != nil {
		return oracleRun{}, fmt.Errorf("oracle output: %w", err)
	}
	if len(r.Tokens) != n || len(r.Steps) != n {
		return oracleRun{}, fmt.Errorf("oracle gave %d tokens and %d steps, asked for %d", len(r.Tokens), len(r.Steps), n)
	}
	return r, nil
}

// oracleTokenize asks llama.cpp's tokenizer for the ids of each text.
func oracleTokenize(model string, texts []string, special bool) ([][]int32, error) {
	in, err := json.Marshal(texts)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "prompts*.json")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(in); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	args := []string{"--model=" + model, "--tokenize=" + f.Name()}
	if special {
		args = append(args, "--special")
	}
	out, err := runOracle(args...)
	if err != nil {
		return nil, err
	}
	var r struct {
		Results []struct {
			Text   string  `json:"text"`
			Tokens []int32 `json:"tokens"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("oracle output: %w", err)
	}
	if len(r.Results) != len(texts) {
		return nil, fmt.Errorf("oracle tokenized %d texts, sent %d", len(r.Results), len(texts))
	}
	ids := make([][]int32, len(texts))
	for i, res := range r.Results {
		if res.Text != texts[i] {
			return nil, fmt.Errorf("oracle result %d is for %q, sent %q", i, res.Text, texts[i])
		}
		ids[i] = res.Tokens
	}
	return ids, nil
}
