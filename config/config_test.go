package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adrg/xdg"

	"github.com/bonsai-chat/bonsai/infer/engine"
)

// noEnv is an empty environment.
func noEnv(string) (string, bool) { return "", false }

func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func parseFlags(t *testing.T, args ...string) *Flags {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	f := RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDefaults(t *testing.T) {
	c, err := Load(LoadOptions{Path: filepath.Join(t.TempDir(), "missing.toml"), Env: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	if c.Backend != d.Backend || c.ContextSize != d.ContextSize || c.Sampling != d.Sampling || c.Think != d.Think {
		t.Fatalf("got %+v, want defaults %+v", c, d)
	}
	for _, e := range c.Entries() {
		if e.Source.Origin != FromDefault || e.Source.String() != "default" {
			t.Errorf("%s from %s, want default", e.Key, e.Source)
		}
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %v", c.Warnings)
	}
}

func TestPrecedence(t *testing.T) {
	path := writeConfig(t, `# bonsai config
model = "/models/file.gguf"
threads = 2
backend = "cpu"

[sampling]
temperature = 0.9
top_k = 40
seed = 7

[keys]
send = "ctrl+j"
`)
	env := envOf(map[string]string{
		"BONSAI_THREADS":     "6",
		"BONSAI_TEMPERATURE": "0.3",
		"BONSAI_BACKEND":     "",    // empty counts as unset
		"BONSAI_TOP_P":       "0.5", // env only
	})
	flags := parseFlags(t, "--temp", "0", "-top-p=0.25", "--think=false", "--ctx", "8192")
	c, err := Load(LoadOptions{Path: path, Env: env, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key, value, source string
	}{
		{"model", `"/models/file.gguf"`, "file:" + path + ":2"},
		{"threads", "6", "env BONSAI_THREADS"},
		{"backend", `"cpu"`, "file:" + path + ":4"},
		{"context_size", "8192", "flag --ctx"},
		{"think", "false", "flag --think"},
		{"theme", `"auto"`, "default"},
		{"sampling.temperature", "0", "flag --temp"},
		{"sampling.top_k", "40", "file:" + path + ":8"},
		{"sampling.top_p", "0.25", "flag --top-p"},
		{"sampling.seed", "7", "file:" + path + ":9"},
		{"sampling.min_p", "0", "default"},
		{"keys.send", `"ctrl+j"`, "file:" + path + ":12"},
	} {
		found := false
		for _, e := range c.Entries() {
			if e.Key != tc.key {
				continue
			}
			found = true
			if e.Value != tc.value || e.Source.String() != tc.source {
				t.Errorf("%s = %s from %s, want %s from %s", tc.key, e.Value, e.Source, tc.value, tc.source)
			}
		}
		if !found {
			t.Errorf("%s missing from Entries", tc.key)
		}
	}
	if c.Sampling.Temperature != 0 || c.Threads != 6 || c.Keys["send"] != "ctrl+j" {
		t.Errorf("typed values: %+v", c)
	}
}

func TestSharedFlags(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		cont     bool
		session  int64
		think    bool
		thinkSrc Origin
	}{
		{nil, false, 0, false, FromDefault},
		{[]string{"-c"}, true, 0, false, FromDefault},
		{[]string{"--continue", "--think"}, true, 0, true, FromFlag},
		{[]string{"--session", "42", "--think=false"}, false, 42, false, FromFlag},
	} {
		f := parseFlags(t, tc.args...)
		c, err := Load(LoadOptions{NoFile: true, Env: noEnv, Flags: f})
		if err != nil {
			t.Fatal(err)
		}
		if f.Continue != tc.cont || f.Session != tc.session || c.Think != tc.think || c.Sources["think"].Origin != tc.thinkSrc {
			t.Errorf("%q: continue %v session %d think %v (%s)", tc.args, f.Continue, f.Session, c.Think, c.Sources["think"])
		}
	}
}

func TestConfigFlagPicksFile(t *testing.T) {
	path := writeConfig(t, "model = \"chosen.gguf\"\n")
	c, err := Load(LoadOptions{Env: noEnv, Flags: parseFlags(t, "--config", path)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "chosen.gguf" || c.Path != path {
		t.Fatalf("model %q from %s", c.Model, c.Path)
	}
}

func TestBadFlagValueFailsAtParse(t *testing.T) {
	for _, args := range [][]string{{"--threads", "many"}, {"--temp", "hot"}, {"--think=maybe"}, {"--session", "x"}} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		RegisterFlags(fs)
		if err := fs.Parse(args); err == nil {
			t.Errorf("%q parsed", args)
		}
	}
}

func TestInvalidConfigNamesWhere(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		env  map[string]string
		args []string
		want []string // substrings of the error
	}{
		{name: "syntax", file: "model = \"x\"\nthreads = = 3\n", want: []string{"config.toml:2:"}},
		{name: "unterminated string", file: "\n\nmodel = \"x\n", want: []string{"config.toml:3:"}},
		{name: "wrong type", file: "model = \"x\"\n\nthreads = \"four\"\n", want: []string{"config.toml:3:", "threads"}},
		{name: "bad backend in file", file: "\nbackend = \"tpu\"\n", want: []string{"backend", `"tpu"`, "config.toml:2", "cpu"}},
		{name: "bad top_p in file", file: "[sampling]\ntop_p = 1.5\n", want: []string{"sampling.top_p", "config.toml:2"}},
		{name: "bad theme", file: "theme = \"pink\"\n", want: []string{"theme", "dark"}},
		{name: "env not a number", env: map[string]string{"BONSAI_THREADS": "lots"}, want: []string{"BONSAI_THREADS", "lots", "integer"}},
		{name: "env out of range", env: map[string]string{"BONSAI_MIN_P": "2"}, want: []string{"sampling.min_p", "env BONSAI_MIN_P"}},
		{name: "flag out of range", args: []string{"--threads", "-1"}, want: []string{"threads", "flag --threads"}},
		{name: "tiny context", args: []string{"--ctx", "3"}, want: []string{"context_size", "flag --ctx"}},
		{name: "nan temperature in file", file: "[sampling]\n\ntemperature = nan\n", want: []string{"sampling.temperature", "config.toml:3", "finite"}},
		{name: "inf top_p in file", file: "[sampling]\ntop_p = inf\n", want: []string{"sampling.top_p", "config.toml:2", "finite"}},
		{name: "-inf min_p in file", file: "[sampling]\nmin_p = -inf\n", want: []string{"sampling.min_p", "config.toml:2"}},
		{name: "nan repeat_penalty in env", env: map[string]string{"BONSAI_REPEAT_PENALTY": "NaN"}, want: []string{"BONSAI_REPEAT_PENALTY", "finite"}},
		{name: "huge repeat_last_n", file: "[sampling]\nrepeat_last_n = 4611686018427387904\n", want: []string{"sampling.repeat_last_n", "config.toml:2", "between 0 and"}},
		{name: "absurd context", env: map[string]string{"BONSAI_CTX": "9223372036854775807"}, want: []string{"context_size", "env BONSAI_CTX", "between 16 and"}},
		{name: "absurd threads", file: "\n\nthreads = 9999999999999\n", want: []string{"threads", "config.toml:3", "between 0 and"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.file)
			_, err := Load(LoadOptions{Path: path, Env: envOf(tc.env), Flags: parseFlags(t, tc.args...)})
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if fromFlag := len(tc.args) > 0; errors.Is(err, ErrFlag) != fromFlag {
				t.Errorf("errors.Is(%v, ErrFlag) = %v, want %v", err, !fromFlag, fromFlag)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestUnknownKeysAreReported(t *testing.T) {
	path := writeConfig(t, `model = "m.gguf"
modle = "typo.gguf"

[sampling]
temprature = 1.0

[colours]
background = "black"
foreground = "white"

[[plugins]]
name = "a"
[[plugins]]
name = "b"

[sampling.extra]
x = 1
`)
	c, err := Load(LoadOptions{Path: path, Env: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		path + `:2: unknown key "modle"`,
		path + `:5: unknown key "sampling.temprature"`,
		path + `:7: unknown table [colours]`,
		path + `:11: unknown table [[plugins]]`,
		path + `:16: unknown table [sampling.extra]`,
	}
	if strings.Join(c.Warnings, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(c.Warnings, "\n"), strings.Join(want, "\n"))
	}
}

func TestKeyLines(t *testing.T) {
	doc := `a = 1
"quoted key" = 2
system_prompt = """
fake = 3
"""
[sampling]
# comment = 4
top_k = 5
[ "keys" ]
send='x'
[[array]]
b = 6
dotted.key = 7
[[array]]
`
	got := keyLines([]byte(doc))
	for key, line := range map[string]int{
		"a": 1, "quoted key": 2, "system_prompt": 3, "sampling.top_k": 8, "[sampling]": 6, "[keys]": 9, "keys.send": 10, "[[array]]": 11, "array.b": 12,
	} {
		if got[key] != line {
			t.Errorf("line of %q = %d, want %d", key, got[key], line)
		}
	}
	for _, key := range []string{"fake", "sampling.comment"} {
		if _, ok := got[key]; ok {
			t.Errorf("%q is not a key but got line %d", key, got[key])
		}
	}
}

func TestDefaultPathHonoursXDG(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("BONSAI_CONFIG_DIR", "")
	xdg.Reload()
	defer xdg.Reload()
	p, err := DefaultPath()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "bonsai", "config.toml"); p != want {
		t.Fatalf("DefaultPath = %s, want %s", p, want)
	}
	os.WriteFile(p, []byte("model = \"from-xdg.gguf\"\n"), 0o644)
	c, err := Load(LoadOptions{Env: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "from-xdg.gguf" {
		t.Fatalf("model %q, want the XDG file's", c.Model)
	}

	override := t.TempDir()
	t.Setenv("BONSAI_CONFIG_DIR", override)
	if p, _ := DefaultPath(); p != filepath.Join(override, "config.toml") {
		t.Fatalf("with BONSAI_CONFIG_DIR: %s", p)
	}
}

func TestSamplingEngine(t *testing.T) {
	s := Defaults().Sampling
	s.Seed = 99
	e := s.Engine()
	if e.Seed != 99 || e.Temperature != 0.5 || e.TopK != 20 || e.TopP != 0.85 || e.RepeatLastN != 64 || e.RepeatPenalty != 1 {
		t.Fatalf("Engine() = %+v", e)
	}
	s.Seed = -1
	if a, b := s.Engine().Seed, s.Engine().Seed; a == b {
		t.Fatalf("seed -1 gave the same seed twice (%d)", a)
	}
}

// A flag's value is checked as it is parsed, so the error comes with the
// flag's name and usage.
func TestNonFiniteFlagIsRefused(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	RegisterFlags(fs)
	err := fs.Parse([]string{"--temp", "+Inf"})
	if err == nil || !strings.Contains(err.Error(), "-temp") || !strings.Contains(err.Error(), "finite") {
		t.Errorf("--temp +Inf: %v", err)
	}
}

// A reply's sampling is the model's recommendation where the user set
// nothing, and the user's value for each key set in the file, the
// environment or a flag.
func TestSamplingFor(t *testing.T) {
	model := engine.Sampling{Temperature: 0.7, TopK: 20, TopP: 0.95, MinP: 0, RepeatPenalty: 1, RepeatLastN: 64}
	def, err := Load(LoadOptions{NoFile: true, Env: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	got := def.SamplingFor(model)
	got.Seed = 0
	if got != model {
		t.Errorf("nothing set: %+v, want the model's %+v", got, model)
	}
	env := func(k string) (string, bool) {
		switch k {
		case "BONSAI_TEMPERATURE":
			return "0.2", true
		case "BONSAI_SEED":
			return "42", true
		}
		return "", false
	}
	mine, err := Load(LoadOptions{NoFile: true, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	got = mine.SamplingFor(model)
	want := model
	want.Temperature, want.Seed = 0.2, 42
	if got != want {
		t.Errorf("temperature and seed set: %+v, want %+v", got, want)
	}
}
