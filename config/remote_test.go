package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRemotes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	file := `
[[remote]]
name = "gpu"
base_url = "http://gpu-box:8000/v1"
api_key_env = "GPU_KEY"
model = "Qwen/Qwen3-32B"
context_size = 32768

[[remote]]
name = "nokey"

[[remote]]
name = "claude"
base_url = "http://gpu-box:8080/v1"
protocol = "anthropic"

[[remote]]
name = "grpc"
base_url = "http://gpu-box:8080/v1"
protocol = "grpc"
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) > 0 {
		t.Errorf("warnings: %v", c.Warnings)
	}
	r, err := c.RemoteFor("remote:gpu")
	if err != nil || r.BaseURL != "http://gpu-box:8000/v1" || r.APIKeyEnv != "GPU_KEY" || r.Model != "Qwen/Qwen3-32B" || r.ContextSize != 32768 {
		t.Errorf("remote:gpu: %+v, %v", r, err)
	}
	if r, err := c.RemoteFor("http://other:8080/v1"); err != nil || r.BaseURL != "http://other:8080/v1" {
		t.Errorf("a URL: %+v, %v", r, err)
	}
	if r, err := c.RemoteFor("claude"); err != nil || r.Protocol != "anthropic" {
		t.Errorf("claude: %+v, %v", r, err)
	}
	for _, name := range []string{"nokey", "missing", "grpc"} {
		if _, err := c.RemoteFor(name); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
