package hub

// registryArch is the architecture (general.architecture) of the registry
// entries that are not qwen3, so that front ends can tell which ones the
// build runs without downloading them.
var registryArch = map[string]string{
	"bonsai-27b": "qwen35",
}

// Arch is the model's general.architecture ("qwen3", "qwen35"), as
// published; "" for a model outside the registry.
func (m Model) Arch() string {
	if m.Name == "" {
		return ""
	}
	if a, ok := registryArch[m.Name]; ok {
		return a
	}
	return "qwen3"
}
