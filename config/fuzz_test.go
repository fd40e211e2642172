package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds the loader any file: it never panics, refuses with
// ErrInvalid (naming the file) or succeeds, and what it accepts passes its
// own validation and holds only finite numbers and in-range sizes.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"", "model = \"m.gguf\"\nthreads = 4\n", "[sampling]\ntemperature = nan\n", "[sampling]\ntop_p = inf\n",
		"context_size = 9223372036854775807\n", "[keys]\nsend = \"bogus+key\"\n", "threads = = 3\n",
		"[[sampling]]\nx = 1\n", "model = '''\nmulti\n'''\nbackend = \"gpu\"\n", "\"quoted.key\" = 1\n[unknown]\na = 1\n",
		"[sampling]\nrepeat_last_n = 4611686018427387904\nseed = -1\n",
		"model = \"x\"\n[sampling]\ntop_k = 3\n", "[keys]\nsend = \"enter\"\n", "a = \"\"\"\nb = 1\n\"\"\"\n[[t]]\nx=1",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		path := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(LoadOptions{Path: path, Env: noEnv})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		if err := c.validate(); err != nil {
			t.Fatalf("accepted a config its validation refuses: %v", err)
		}
		for _, v := range []float64{c.Sampling.Temperature, c.Sampling.TopP, c.Sampling.MinP, c.Sampling.RepeatPenalty} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("accepted a non-finite value: %+v", c.Sampling)
			}
		}
		if c.ContextSize < 0 || c.ContextSize > maxContext || c.Sampling.RepeatLastN > maxRepeatLastN || c.Threads < 0 {
			t.Fatalf("accepted sizes %d, %d, %d", c.ContextSize, c.Sampling.RepeatLastN, c.Threads)
		}
		_ = c.Entries()
	})
}
