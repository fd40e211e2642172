package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
)

// Resolve turns --model's argument into a file path: an existing file is
// used as is; otherwise a registry name ("bonsai-8b") or a file name or stem
// in modelsDir ("Bonsai-8B-Q1_0.gguf", "Bonsai-8B-Q1_0") is looked up there.
// The built-in model's name ("bonsai-tiny") resolves to defaultmodel.Path,
// which defaultmodel.Open opens. Callers choose the default (DefaultModel,
// or the built-in model) for an empty argument.
func Resolve(nameOrPath, modelsDir string) (string, error) {
	if nameOrPath == "" {
		return "", fmt.Errorf("%w: no model given", ErrUnknownModel)
	}
	if st, err := os.Stat(nameOrPath); err == nil {
		if !st.Mode().IsRegular() {
			// A FIFO or a device would block or stream forever once
			// opened; only a regular file can be a model.
			return "", fmt.Errorf("%s is %s: %w", nameOrPath, gguf.FileKind(st.Mode()), ErrNotModelFile)
		}
		return nameOrPath, nil
	}
	if m, ok := Lookup(nameOrPath); ok {
		p := filepath.Join(modelsDir, m.File)
		if st, err := os.Stat(p); err == nil {
			if !st.Mode().IsRegular() {
				return "", fmt.Errorf("%s is %s: %w", p, gguf.FileKind(st.Mode()), ErrNotModelFile)
			}
			return p, nil
		}
		return "", fmt.Errorf("%w: %s is not in %s; run 'bonsai pull %s' first", ErrNotDownloaded, m.Name, modelsDir, m.Name)
	}
	looksLikePath := strings.ContainsAny(nameOrPath, `/\`)
	if !looksLikePath && checkFileName(nameOrPath) == nil {
		for _, name := range []string{nameOrPath, nameOrPath + ".gguf"} {
			p := filepath.Join(modelsDir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	if looksLikePath || strings.HasSuffix(strings.ToLower(nameOrPath), ".gguf") {
		_, err := os.Stat(nameOrPath)
		return "", fmt.Errorf("model file %s: %w", nameOrPath, fsProblem(err))
	}
	if strings.EqualFold(nameOrPath, defaultmodel.Name) {
		// The built-in model, by the name info and the chat give it.
		return defaultmodel.Path, nil
	}
	return "", unknownModel(nameOrPath)
}

// Local is a model file in the models directory.
type Local struct {
	Path     string
	Size     int64
	Modified time.Time
	Model    *Model // the registry entry with this file name, if any
	Partial  bool   // an unfinished download (a .partial file)
}

// List returns the .gguf files (and unfinished downloads) in dir, sorted by
// name. A directory that does not exist yet holds no models.
func List(dir string) ([]Local, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot list the models in %s: %w", dir, fsProblem(err))
	}
	var out []Local
	for _, e := range entries {
		name := e.Name()
		partial := strings.HasSuffix(name, ".gguf"+PartialSuffix)
		if !partial && !strings.HasSuffix(strings.ToLower(name), ".gguf") {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || (partial && info.Size() == 0) {
			continue // an empty partial file holds nothing to resume
		}
		l := Local{Path: filepath.Join(dir, name), Size: info.Size(), Modified: info.ModTime(), Partial: partial}
		file := strings.TrimSuffix(name, PartialSuffix)
		for i := range Registry {
			if Registry[i].File == file {
				l.Model = &Registry[i]
			}
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// fsProblem is a file system error without the system call and path that
// Go's errors name ("stat /x/y.gguf: no such file or directory" becomes
// "no such file or directory"): messages name the file in the user's
// words themselves. errors.Is still sees fs.ErrNotExist and the rest.
func fsProblem(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
