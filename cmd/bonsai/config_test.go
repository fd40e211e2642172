package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `bonsai config` refuses values that would break the chat, naming the file
// and line they came from: a key the terminal can never send (Enter would
// stop sending), a NaN temperature, a repeat window the sampler cannot
// allocate.
func TestConfigCommandRefusesBadValuesWithTheirSource(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"[keys]\nsend = \"bogus+key\"\n", []string{"keys.send", "bogus+key", "config.toml:2", "unknown key"}},
		{"\n[sampling]\ntemperature = nan\n", []string{"sampling.temperature", "config.toml:3", "finite"}},
		{"[sampling]\nrepeat_last_n = 4611686018427387904\n", []string{"sampling.repeat_last_n", "config.toml:2"}},
	} {
		dir := isolatedXDG(t)
		cfgDir := filepath.Join(dir, "cfg")
		if err := os.MkdirAll(cfgDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, "config.toml"), []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("BONSAI_CONFIG_DIR", cfgDir)
		_, errOut, code := run(t, "config")
		if code == 0 {
			t.Errorf("%q accepted", tc.file)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%q: error %q does not mention %q", tc.file, errOut, w)
			}
		}
	}
}
