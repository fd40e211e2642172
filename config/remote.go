package config

import (
	"fmt"
	"slices"
	"strings"
)

// Remote is an OpenAI-compatible server the chat can answer from
// ([[remote]] in config.toml): a vLLM, llama-server or ollama serving a
// model bigger than this machine, or another bonsai serve.
type Remote struct {
	Name    string `toml:"name"`     // what --remote NAME and /backend remote:NAME say
	BaseURL string `toml:"base_url"` // e.g. http://gpu-box:8000/v1
	// APIKeyEnv names the environment variable holding the key; the key
	// itself never goes in the file.
	APIKeyEnv   string `toml:"api_key_env"`
	Model       string `toml:"model"`        // the server's model ("": the first it lists)
	ContextSize int    `toml:"context_size"` // when the server does not report it
	// Protocol is the API the replies are asked in: "chat" (Chat
	// Completions, the default), "responses" (OpenAI's Responses) or
	// "anthropic" (Anthropic's Messages), at the same base_url.
	Protocol string `toml:"protocol"`
}

// RemoteFor resolves --remote: a configured remote's name, or a base URL
// (http:// or https://) used as is.
func (c *Config) RemoteFor(nameOrURL string) (Remote, error) {
	if strings.HasPrefix(nameOrURL, "http://") || strings.HasPrefix(nameOrURL, "https://") {
		return Remote{Name: "", BaseURL: nameOrURL}, nil
	}
	name := strings.TrimPrefix(nameOrURL, "remote:")
	if i := slices.IndexFunc(c.Remotes, func(r Remote) bool { return r.Name == name }); i >= 0 {
		r := c.Remotes[i]
		if r.BaseURL == "" {
			return Remote{}, fmt.Errorf("%w: [[remote]] %q has no base_url", ErrInvalid, name)
		}
		if !slices.Contains([]string{"", "chat", "responses", "anthropic"}, r.Protocol) {
			return Remote{}, fmt.Errorf("%w: [[remote]] %q has protocol %q: chat, responses or anthropic", ErrInvalid, name, r.Protocol)
		}
		return r, nil
	}
	var names []string
	for _, r := range c.Remotes {
		names = append(names, r.Name)
	}
	if len(names) == 0 {
		return Remote{}, fmt.Errorf("%w: no remote named %q: add a [[remote]] entry to %s, or give a URL", ErrInvalid, name, c.Path)
	}
	return Remote{}, fmt.Errorf("%w: no remote named %q (configured: %s)", ErrInvalid, name, strings.Join(names, ", "))
}
