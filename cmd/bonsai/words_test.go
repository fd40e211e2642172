package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Messages say what happened in the user's words: one line for a bad flag,
// spelled as typed, with a near flag or command it may have meant.
func TestMessagesInTheUsersWords(t *testing.T) {
	long := strings.Repeat("word ", 40)
	notModel := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notModel, []byte("some notes, not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args    []string
		code    int
		want    []string
		notWant []string
	}{
		{[]string{"run", "--nope", "hi"}, 2, []string{"unknown flag --nope", "'bonsai run -h'"}, []string{"-nope:", "flag provided"}},
		{[]string{"run", "--maxtokens", "3", "hi"}, 2, []string{"did you mean --max-tokens?"}, nil},
		{[]string{"run", "--raw=maybe", "hi"}, 2, []string{`"maybe" for --raw`, "true or false"}, []string{"parse error"}},
		{[]string{"export", "-x", "1"}, 2, []string{"unknown flag -x;"}, []string{"did you mean"}},
		{[]string{"run", "--continu", "hi"}, 2, []string{"did you mean --continue?"}, nil},
		{[]string{"sessions", "--jsn"}, 2, []string{"did you mean --json?", "'bonsai sessions -h'"}, nil},
		{[]string{"runn"}, 2, []string{"did you mean 'bonsai run'?"}, nil},
		{[]string{"help", "sesions"}, 2, []string{"did you mean 'bonsai sessions'?"}, nil},
		{[]string{"info", notModel}, 1, []string{notModel + " is not a GGUF model file", "bonsai models"}, []string{"magic"}},
		{[]string{"run", "--backend", "cpu", "--ctx", "16", long}, 1, []string{"context of 16 tokens", "--ctx"}, []string{"/new"}},
	} {
		_, errOut, code := run(t, tc.args...)
		if code != tc.code || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and one line", tc.args, code, errOut, tc.code)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%q: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(errOut, w) {
				t.Errorf("%q: stderr %q has %q", tc.args, errOut, w)
			}
		}
	}
}

// `bonsai help COMMAND` is the command's own usage; `bonsai gpu -h` is
// bonsai's, not Go's "Usage of gpu:".
func TestHelpForACommand(t *testing.T) {
	cases := [][2]string{{"help run", "usage: bonsai run"}, {"run -h", "usage: bonsai run"}}
	if _, ok := commands["gpu"]; ok {
		cases = append(cases, [2]string{"gpu -h", "usage: bonsai gpu"}, [2]string{"help gpu", "usage: bonsai gpu"})
	}
	for _, tc := range cases {
		out, errOut, code := run(t, strings.Fields(tc[0])...)
		if code != 0 || !strings.HasPrefix(out, tc[1]) {
			t.Errorf("%s: exit %d, stdout %q (stderr %q); want it to start %q", tc[0], code, out, errOut, tc[1])
		}
	}
}

// `bonsai gpu` keeps the drivers' own stderr (Mesa's XDG_RUNTIME_DIR
// complaint, five times over) in the log, as run and serve do.
func TestGPUKeepsDriverNoiseInTheLog(t *testing.T) {
	if _, ok := commands["gpu"]; !ok {
		t.Skip("built without the GPU backend")
	}
	bin, err := bonsaiBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "gpu")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "XDG_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CACHE_HOME="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Run() // no adapter is no failure of this test
	if strings.Contains(stderr.String(), "XDG_RUNTIME_DIR") {
		t.Errorf("the driver's stderr reached the terminal:\n%s", stderr.String())
	}
}
