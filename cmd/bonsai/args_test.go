package main

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/adrg/xdg"
	"github.com/bonsai-chat/bonsai/config"
)

// TestMain keeps the in-process tests from reading the user's settings
// and the harness's stdin: every command now reads the configuration, and
// `bonsai run` a piped prompt.
func TestMain(m *testing.M) {
	for _, name := range config.EnvNames() {
		os.Unsetenv(name)
	}
	dir, err := os.MkdirTemp("", "bonsai-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv("BONSAI_CONFIG_DIR", dir)
	// bonsai run keeps its runs as sessions: never in the user's database.
	os.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	xdg.Reload()
	if f, err := os.Open(os.DevNull); err == nil {
		stdin = f
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		ctx  int
		raw  bool
		sys  string
	}{
		{[]string{"hi", "--ctx", "256"}, []string{"hi"}, 256, false, ""},
		{[]string{"--ctx", "256", "hi"}, []string{"hi"}, 256, false, ""},
		{[]string{"a", "--raw", "b", "--ctx=7"}, []string{"a", "b"}, 7, true, ""},
		{[]string{"--raw", "--", "--ctx", "9"}, []string{"--ctx", "9"}, 0, true, ""},
		{[]string{"hi", "--", "--raw"}, []string{"hi", "--raw"}, 0, false, ""},
		// "--" as a flag's value does not end the flags.
		{[]string{"--system", "--", "hi", "--ctx", "3"}, []string{"hi"}, 3, false, "--"},
		{[]string{"--system=x", "--", "--ctx"}, []string{"--ctx"}, 0, false, "x"},
		{[]string{"-"}, []string{"-"}, 0, false, ""},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		ctx := fs.Int("ctx", 0, "")
		raw := fs.Bool("raw", false, "")
		sys := fs.String("system", "", "")
		pos, err := parseArgs(fs, tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !reflect.DeepEqual(pos, tc.pos) || *ctx != tc.ctx || *raw != tc.raw || *sys != tc.sys {
			t.Errorf("%q: positional %q ctx %d raw %v system %q; want %q %d %v %q",
				tc.args, pos, *ctx, *raw, *sys, tc.pos, tc.ctx, tc.raw, tc.sys)
		}
	}
}

// child runs the built bonsai with stdin and extra environment, as a user's
// shell would.
func child(t *testing.T, in string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin, err := bonsaiBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	if in != "" {
		cmd.Stdin = strings.NewReader(in)
	}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// Each command's bad flag is reported once, in one line and as typed, as a
// usage error; the flag package used to print it too, and the whole usage
// before it.
func TestBadFlagReportedOnce(t *testing.T) {
	// Every registered subcommand, so that a new one is held to it too,
	// and the bare chat.
	cmds := []string{""}
	for name := range commands {
		cmds = append(cmds, name)
	}
	sort.Strings(cmds)
	for _, cmd := range cmds {
		args := []string{"--no-such-flag"}
		if cmd != "" {
			args = append([]string{cmd}, args...)
		}
		_, errOut, code := child(t, "", nil, args...)
		if n := strings.Count(errOut, "unknown flag --no-such-flag"); n != 1 || code != 2 {
			t.Errorf("bonsai %s --no-such-flag: exit %d, the error %d times:\n%s", cmd, code, n, errOut)
		}
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "bonsai: ") {
			t.Errorf("bonsai %s: want the error alone on one line: %q", cmd, errOut)
		}
	}
	// A value out of range, which the configuration refuses.
	_, errOut, code := child(t, "", nil, "run", "--ctx", "5", "hi")
	if n := strings.Count(errOut, "must be between 16 and"); n != 1 || code != 2 {
		t.Errorf("run --ctx 5: exit %d, the error %d times:\n%s", code, n, errOut)
	}
}

// jsonlDone runs `bonsai run --format jsonl` and returns its summary line.
func jsonlDone(t *testing.T, in string, env []string, args ...string) (doneLine, string) {
	t.Helper()
	args = append([]string{"run", "--backend", "cpu", "--format", "jsonl", "--max-tokens", "6"}, args...)
	out, errOut, code := child(t, in, env, args...)
	if code != 0 {
		t.Fatalf("%q: exit %d: %s", args, code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var d doneLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &d); err != nil || !d.Done {
		t.Fatalf("%q: no summary line in %q", args, out)
	}
	return d, strings.Join(lines[:len(lines)-1], "\n")
}

func TestRunPromptSources(t *testing.T) {
	greedy := []string{"--temp", "0"}
	argDone, argTokens := jsonlDone(t, "", nil, append(greedy, "In the beginning")...)

	// Flags after the prompt are flags; after "--" they are the prompt.
	afterDone, afterTokens := jsonlDone(t, "", nil, "In the beginning", "--temp", "0", "--ctx", "256")
	if afterTokens != argTokens || afterDone.PromptTokens != argDone.PromptTokens {
		t.Errorf("flags after the prompt changed the reply:\n%s\n%s", afterTokens, argTokens)
	}
	dashDone, _ := jsonlDone(t, "", nil, append(greedy, "--", "--temp")...)
	if dashDone.PromptTokens == argDone.PromptTokens {
		t.Errorf(`"--temp" after "--" was not the prompt (%d prompt tokens)`, dashDone.PromptTokens)
	}

	// Piped, with no argument or "-": the same message.
	for _, args := range [][]string{greedy, append(greedy, "-")} {
		d, tokens := jsonlDone(t, "In the beginning", nil, args...)
		if tokens != argTokens || d.PromptTokens != argDone.PromptTokens {
			t.Errorf("%q with the prompt on stdin: %d prompt tokens, reply\n%s\nwant %d,\n%s", args, d.PromptTokens, tokens, argDone.PromptTokens, argTokens)
		}
	}
	// Piped context and a prompt: the context, a blank line, the prompt.
	both, bothTokens := jsonlDone(t, "Hear me.\n", nil, append(greedy, "In the beginning")...)
	joined, joinedTokens := jsonlDone(t, "", nil, append(greedy, "Hear me.\n\nIn the beginning")...)
	if both.PromptTokens != joined.PromptTokens || bothTokens != joinedTokens {
		t.Errorf("piped context + prompt: %d prompt tokens, want %d", both.PromptTokens, joined.PromptTokens)
	}

	// Nothing to send.
	for _, in := range []string{"", " \n"} {
		_, errOut, code := child(t, in, nil, "run", "--backend", "cpu")
		if code != 2 || strings.Count(errOut, "bonsai: ") != 1 {
			t.Errorf("run with stdin %q: exit %d, %s", in, code, errOut)
		}
	}
	if _, errOut, code := child(t, "", nil, "run", "a", "b"); code != 2 || !strings.Contains(errOut, "one PROMPT") {
		t.Errorf("run a b: exit %d, %s", code, errOut)
	}
}

// One seed rule in run and bench (config.Sampling.SeedFor): a seed given
// (0 included) repeats the result; none draws one, which is recorded.
func TestSeedRule(t *testing.T) {
	sampled := []string{"--temp", "1.5", "--top-k", "0", "--top-p", "1", "Blessed are"}
	a, aTokens := jsonlDone(t, "", nil, append([]string{"--seed", "0"}, sampled...)...)
	b, bTokens := jsonlDone(t, "", nil, append([]string{"--seed", "0"}, sampled...)...)
	if a.Seed != 0 || b.Seed != 0 || aTokens != bTokens {
		t.Errorf("--seed 0: seeds %d, %d; replies\n%s\n%s", a.Seed, b.Seed, aTokens, bTokens)
	}
	r1, r1Tokens := jsonlDone(t, "", nil, sampled...)
	r2, _ := jsonlDone(t, "", nil, sampled...)
	if r1.Seed == r2.Seed {
		t.Errorf("no --seed: both runs drew seed %d", r1.Seed)
	}
	again, againTokens := jsonlDone(t, "", []string{"BONSAI_SEED=" + jsonNumber(r1.Seed)}, sampled...)
	if again.Seed != r1.Seed || againTokens != r1Tokens {
		t.Errorf("replaying the recorded seed %d through BONSAI_SEED gave seed %d and\n%s\nnot\n%s", r1.Seed, again.Seed, againTokens, r1Tokens)
	}
}

func jsonNumber(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// Every command that loads a model reads config.toml and BONSAI_*, as the
// chat does; flags still win.
func TestCommandsReadTheConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := "threads = 1\n[sampling]\nseed = 41\n"
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"BONSAI_CONFIG_DIR=" + dir, "BONSAI_BACKEND=cpu"}

	d, _ := jsonlDone(t, "", env, "hi")
	if d.Seed != 41 || d.Backend != "cpu" {
		t.Errorf("run: seed %d backend %q, want the file's 41 and the environment's cpu", d.Seed, d.Backend)
	}
	if d, _ := jsonlDone(t, "", env, "--seed", "3", "hi"); d.Seed != 3 {
		t.Errorf("run --seed 3 under a file's seed 41: seed %d", d.Seed)
	}

	out, errOut, code := child(t, "", env, "bench", "-p", "8", "-n", "2", "-r", "1", "--format", "json")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, errOut)
	}
	var results []benchResult
	if err := json.Unmarshal([]byte(out), &results); err != nil || len(results) != 2 {
		t.Fatalf("bench json %q: %v", out, err)
	}
	for _, r := range results {
		if r.Threads != 1 || r.Seed != 41 || r.Backend != "cpu" || r.Model != "bonsai-tiny" {
			t.Errorf("bench %s: threads %d seed %d backend %q model %q; want the file's 1 and 41, cpu, bonsai-tiny",
				r.Test, r.Threads, r.Seed, r.Backend, r.Model)
		}
	}

	// The model setting reaches info, tokenize and serve: a missing file is named.
	bad := append(env, "BONSAI_MODEL=/nonexistent/from-env.gguf")
	for _, args := range [][]string{{"info"}, {"tokenize", "hi"}, {"run", "hi"}, {"bench", "-r", "1"}, {"serve", "--port", "0"}} {
		if _, errOut, code := child(t, "", bad, args...); code != 1 || !strings.Contains(errOut, "from-env.gguf") {
			t.Errorf("%q with BONSAI_MODEL: exit %d, %s", args, code, errOut)
		}
	}
}

// A GPU driver's own complaints (lavapipe's about XDG_RUNTIME_DIR, printed
// while adapters are probed) go to the log, not to the user's stderr, which
// keeps bonsai's own messages. Without a Vulkan driver on the machine the
// first check has nothing to catch; CI installs lavapipe.
func TestDriverWarningsStayInLog(t *testing.T) {
	state := t.TempDir()
	env := []string{"XDG_RUNTIME_DIR=", "XDG_STATE_HOME=" + state}
	_, stderr, code := child(t, "", env, "run", "--backend", "auto", "--max-tokens", "2", "hi")
	if code != 0 {
		t.Fatalf("run exited %d: %s", code, stderr)
	}
	if strings.Contains(stderr, "XDG_RUNTIME_DIR") {
		t.Errorf("the driver's warning reached stderr:\n%s", stderr)
	}
	_, stderr, code = child(t, "", env, "run", "--backend", "auto", "--model", filepath.Join(state, "missing.gguf"), "hi")
	if code == 0 || !strings.Contains(stderr, "missing.gguf") {
		t.Errorf("exit %d, stderr %q: want bonsai's own error on stderr", code, stderr)
	}
}
