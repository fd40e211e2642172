package infer

import (
	"fmt"
	"sort"
	"sync"
)

// BackendFactory creates a backend. It returns an error wrapping
// ErrBackendUnavailable when the machine cannot run it.
type BackendFactory func(opts BackendOptions) (Backend, error)

var (
	backendsMu sync.Mutex
	backends   = map[string]BackendFactory{}
)

// RegisterBackend makes a backend available under name. infer/cpu and
// infer/gpu call it from init, so that infer needs to import neither;
// commands import them for their side effect. Registering a name twice
// replaces the earlier factory.
func RegisterBackend(name string, f BackendFactory) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends[name] = f
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewBackend creates the backend registered under name. "auto" (or "") picks
// the GPU when one is registered and available, else the CPU.
func NewBackend(name string, opts BackendOptions) (Backend, error) {
	if name == "" || name == "auto" {
		// Any GPU failure falls back: "auto" promises a working backend.
		// Callers that must know why ask for "gpu" explicitly.
		auto := opts
		auto.Auto = true
		if b, err := NewBackend("gpu", auto); err == nil {
			return b, nil
		}
		return NewBackend("cpu", opts)
	}
	backendsMu.Lock()
	f, ok := backends[name]
	backendsMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %v)", ErrUnknownBackend, name, Backends())
	}
	b, err := f(opts)
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", name, err)
	}
	return b, nil
}
