// Package hub resolves model names to GGUF files: it knows PrismML's
// published Bonsai files, downloads them resumably into the models directory
// with size, checksum and format checks, and finds local models for
// --model.
package hub

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/adrg/xdg"
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
)

// Model is a downloadable model file.
type Model struct {
	Name    string // what users type: "bonsai-8b"
	Repo    string // Hugging Face repository, "prism-ml/Bonsai-8B-gguf"
	File    string // file name in the repository and in the models directory
	Size    int64  // bytes; 0 when not known in advance
	SHA256  string // lower-case hex; "" when the full hash is not known
	Summary string
	Source  string // download URL; empty means Hugging Face's URL for Repo and File
}

// Check says how a download of m is verified, for listings: by its pinned
// SHA256, else by its size (when known) and GGUF structure, and by the
// SHA256 the server announces, when it announces one (Hugging Face does).
func (m Model) Check() string {
	switch {
	case m.SHA256 != "":
		return "sha256 pinned"
	case m.Size > 0:
		return "no sha256: size+gguf"
	}
	return "no sha256: gguf"
}

// URL is where the file is downloaded from.
func (m Model) URL() string {
	if m.Source != "" {
		return m.Source
	}
	return "https://huggingface.co/" + m.Repo + "/resolve/main/" + m.File
}

// Registry lists the known models. Sizes are the published file sizes
// where they are known to the byte (0 otherwise: Bonsai 2's are published
// rounded); only abbreviated hashes are known, so no SHA256 is pinned and
// downloads are checked by size and GGUF structure, and by the SHA256
// Hugging Face announces with each file (announcedSHA256).
//
// After the Bonsai family, a few well-known small models of the other
// architectures bonsai runs, in the Q4_K_M files most users have.
var Registry = []Model{
	{Name: "bonsai-1.7b", Repo: "prism-ml/Bonsai-1.7B-gguf", File: "Bonsai-1.7B-Q1_0.gguf", Size: 248_302_272,
		Summary: "1-bit Bonsai 1.7B (Q1_0, qwen3), the smallest"},
	{Name: "bonsai-4b", Repo: "prism-ml/Bonsai-4B-gguf", File: "Bonsai-4B-Q1_0.gguf", Size: 572_270_624,
		Summary: "1-bit Bonsai 4B (Q1_0, qwen3)"},
	{Name: "bonsai-8b", Repo: "prism-ml/Bonsai-8B-gguf", File: "Bonsai-8B-Q1_0.gguf", Size: 1_158_654_496,
		Summary: "1-bit Bonsai 8B (Q1_0, qwen3)"},
	{Name: "bonsai-27b", Repo: "prism-ml/Bonsai-27B-gguf", File: "Bonsai-27B-Q1_0.gguf", Size: 3_803_452_480,
		Summary: "1-bit Bonsai 27B (Q1_0, qwen35 hybrid)"},
	{Name: "ternary-bonsai-27b", Repo: "prism-ml/Ternary-Bonsai-27B-gguf", File: "Ternary-Bonsai-27B-Q2_g64.gguf", Size: 7_585_330_240,
		Summary: "ternary Bonsai 27B (Q2_0 group 64, qwen35 hybrid)"},
	{Name: "bonsai-2-27b", Repo: "prism-ml/Ternary-Bonsai-2-27B-gguf", File: "Ternary-Bonsai-2-27B-PQ2_0.gguf",
		Summary: "Bonsai 2 27B (PQ2_0, Hadamard-rotated, qwen35 hybrid; ~7.2 GB), PrismML's default download"},
	{Name: "bonsai-2-27b-ptq1_0", Repo: "prism-ml/Ternary-Bonsai-2-27B-gguf", File: "Ternary-Bonsai-2-27B-PTQ1_0.gguf",
		Summary: "Bonsai 2 27B (PTQ1_0, Hadamard-rotated, qwen35 hybrid; ~5.9 GB), the smallest 27B"},
	{Name: "ternary-bonsai-1.7b", Repo: "prism-ml/Ternary-Bonsai-1.7B-gguf", File: "Ternary-Bonsai-1.7B-Q2_0_g64.gguf",
		Summary: "ternary Bonsai 1.7B (Q2_0 group 64, qwen3)"},
	{Name: "ternary-bonsai-4b", Repo: "prism-ml/Ternary-Bonsai-4B-gguf", File: "Ternary-Bonsai-4B-Q2_0_g64.gguf",
		Summary: "ternary Bonsai 4B (Q2_0 group 64, qwen3)"},
	{Name: "ternary-bonsai-8b", Repo: "prism-ml/Ternary-Bonsai-8B-gguf", File: "Ternary-Bonsai-8B-Q2_0_g64.gguf", Size: 2_310_125_920,
		Summary: "ternary Bonsai 8B (Q2_0 group 64, qwen3)"},

	{Name: "llama-3.2-1b", Repo: "bartowski/Llama-3.2-1B-Instruct-GGUF", File: "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
		Summary: "Meta Llama 3.2 1B Instruct (Q4_K_M, llama; ~0.8 GB)"},
	{Name: "llama-3.2-3b", Repo: "bartowski/Llama-3.2-3B-Instruct-GGUF", File: "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
		Summary: "Meta Llama 3.2 3B Instruct (Q4_K_M, llama; ~2.0 GB)"},
	{Name: "qwen2.5-1.5b", Repo: "Qwen/Qwen2.5-1.5B-Instruct-GGUF", File: "qwen2.5-1.5b-instruct-q4_k_m.gguf",
		Summary: "Qwen2.5 1.5B Instruct (Q4_K_M, qwen2; ~1.1 GB)"},
	{Name: "gemma-3-1b", Repo: "bartowski/google_gemma-3-1b-it-GGUF", File: "google_gemma-3-1b-it-Q4_K_M.gguf",
		Summary: "Google Gemma 3 1B IT (Q4_K_M, gemma3; ~0.8 GB)"},
	{Name: "mistral-7b", Repo: "bartowski/Mistral-7B-Instruct-v0.3-GGUF", File: "Mistral-7B-Instruct-v0.3-Q4_K_M.gguf",
		Summary: "Mistral 7B Instruct v0.3 (Q4_K_M, llama; ~4.4 GB)"},
	{Name: "tinyllama-1.1b", Repo: "TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF", File: "tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf",
		Summary: "TinyLlama 1.1B Chat v1.0 (Q4_K_M, llama; ~0.7 GB)"},
}

// DefaultModel is the registry name used when none is given.
const DefaultModel = "bonsai-1.7b"

// Lookup finds a registry entry by name, ignoring case.
func Lookup(name string) (Model, bool) {
	for _, m := range Registry {
		if strings.EqualFold(m.Name, name) {
			return m, true
		}
	}
	return Model{}, false
}

// Names lists the registry names.
func Names() []string {
	names := make([]string, len(Registry))
	for i, m := range Registry {
		names[i] = m.Name
	}
	return names
}

// DefaultDir is the models directory, $XDG_DATA_HOME/bonsai/models.
func DefaultDir() string { return filepath.Join(xdg.DataHome, "bonsai", "models") }

// Errors callers branch on.
var (
	// ErrUnknownModel: neither a file nor a registry name.
	ErrUnknownModel = errors.New("unknown model")
	// ErrNotModelFile: the path names a directory, a FIFO, a device or
	// another file that is not a regular file.
	ErrNotModelFile = errors.New("not a regular file, so not a model file")
	// ErrNotDownloaded: a registry name whose file is not in the models
	// directory yet.
	ErrNotDownloaded = errors.New("model not downloaded")
	// ErrInterrupted: the transfer stopped early; the partial file is kept
	// and the next pull resumes it.
	ErrInterrupted = errors.New("download interrupted")
	// ErrSizeMismatch: the server's or the file's size differs from the
	// expected one.
	ErrSizeMismatch = errors.New("size mismatch")
	// ErrChecksum: the downloaded bytes do not hash to the expected SHA256.
	ErrChecksum = errors.New("sha256 mismatch")
	// ErrNotGGUF: the downloaded file is not a valid GGUF file (an HTML
	// error page, say).
	ErrNotGGUF = errors.New("download is not a valid GGUF file")
	// ErrDiskFull: no space left for the download.
	ErrDiskFull = errors.New("not enough disk space")
	// ErrBusy: another process is downloading the same file.
	ErrBusy = errors.New("another bonsai pull is downloading this file")
	// ErrHTTP: the server answered with an error status.
	ErrHTTP = errors.New("HTTP error")
	// ErrStalled: the server sent nothing for Options.StallTimeout (it
	// comes with ErrInterrupted: the transfer resumes).
	ErrStalled = errors.New("the server stopped sending")
	// ErrRedirectLoop: the URL redirects too many times (in a loop).
	ErrRedirectLoop = errors.New("too many redirects")
)

func unknownModel(name string) error {
	return fmt.Errorf("%w %q: not a file, and not %s (built in) or one of %s", ErrUnknownModel, name, defaultmodel.Name, strings.Join(Names(), ", "))
}
