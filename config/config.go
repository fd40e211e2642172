// Package config resolves bonsai's settings and says where each came from:
// built-in defaults, then the TOML file ($XDG_CONFIG_HOME/bonsai/config.toml),
// then BONSAI_* environment variables, then command-line flags (RegisterFlags),
// each later one winning. It also keeps the small UI state file and the log
// file under $XDG_STATE_HOME/bonsai.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/adrg/xdg"
	"github.com/bonsai-chat/bonsai/infer"
)

// Config is the effective configuration. Field tags are the TOML keys.
type Config struct {
	Model       string `toml:"model"`   // GGUF file to load
	Backend     string `toml:"backend"` // "cpu", "gpu" or "auto"
	Adapter     string `toml:"adapter"` // GPU adapter name (substring); "" picks the best
	Threads     int    `toml:"threads"` // CPU threads; 0 uses every core
	ContextSize int    `toml:"context_size"`
	// CacheTypeK and CacheTypeV are the KV cache's types, as llama.cpp's
	// --cache-type-k/v name them: "f16" (the default) or "q8_0".
	CacheTypeK   string `toml:"cache_type_k"`
	CacheTypeV   string `toml:"cache_type_v"`
	Think        bool   `toml:"think"` // thinking mode (off by default, as PrismML runs Bonsai 1.x)
	Theme        string `toml:"theme"` // "auto", "dark" or "light"
	SystemPrompt string `toml:"system_prompt"`
	// Spec is speculative decoding: "auto" (a draft model when Draft is
	// set, else prompt lookup, off on the GPU backend), "ngram", "draft"
	// or "off".
	Spec     string   `toml:"spec"`
	Draft    string   `toml:"draft"` // draft model: a GGUF file with the model's vocabulary
	Sampling Sampling `toml:"sampling"`
	Serve    Serve    `toml:"serve"`
	// Keys overrides key bindings: action name → key (as the TUI spells
	// them, e.g. "ctrl+j"). The TUI validates the names.
	Keys map[string]string `toml:"keys"`
	// Remotes are the OpenAI-compatible servers --remote NAME picks
	// ([[remote]] tables, remote.go).
	Remotes []Remote `toml:"remote"`

	// ResumeCacheMB bounds the model states saved for resuming chats
	// without reading them again (the XDG cache dir); 0 saves none.
	ResumeCacheMB int `toml:"resume_cache_mb"`

	// Path is the config file that was read (it may not exist).
	Path string `toml:"-"`
	// Sources says where each setting came from, by TOML key ("model",
	// "sampling.temperature", "keys.send").
	Sources map[string]Source `toml:"-"`
	// Warnings are problems that did not stop loading, such as unknown keys
	// in the file ("config.toml:7: unknown key \"temprature\"").
	Warnings []string `toml:"-"`
}

// Serve holds `bonsai serve`'s settings.
type Serve struct {
	// CORS are the web origins allowed to call the server from a browser,
	// comma-separated ("*": any); "" (the default) allows none.
	CORS string `toml:"cors"`
}

// Sampling holds the sampler settings. Seed -1 draws a new seed per reply.
type Sampling struct {
	Temperature   float64 `toml:"temperature"` // 0: greedy
	TopK          int     `toml:"top_k"`       // 0: off
	TopP          float64 `toml:"top_p"`       // 1: off
	MinP          float64 `toml:"min_p"`       // 0: off
	RepeatPenalty float64 `toml:"repeat_penalty"`
	RepeatLastN   int     `toml:"repeat_last_n"`
	Seed          int64   `toml:"seed"`
}

// Defaults are the built-in settings: PrismML's sampling for Bonsai 1.x
// (the chat uses each model's own recommendation for the keys the user
// leaves unset: SamplingFor), thinking off (as PrismML runs them), the
// context left to the model (4096 tokens, capped by what it was trained on).
func Defaults() Config {
	return Config{
		Backend:     "auto",
		Threads:     0,
		ContextSize: 0,
		CacheTypeK:  "f16",
		CacheTypeV:  "f16",
		Think:       false, // PrismML runs Bonsai 1.x with thinking off (enable_thinking: false)
		Theme:       "auto",
		Spec:        "auto",
		// Eight chats of 4,000 tokens of the 1.7B (470 MB each).
		ResumeCacheMB: 4096,
		Sampling: Sampling{
			// PrismML's recommendation for Bonsai 1.x (Bonsai-demo's
			// run_llama.sh): temperature 0.5, top-p 0.85, top-k 20.
			Temperature:   0.5,
			TopK:          20,
			TopP:          0.85,
			MinP:          0,
			RepeatPenalty: 1,
			RepeatLastN:   64,
			Seed:          -1,
		},
		Keys: map[string]string{},
	}
}

// Origin is the kind of place a setting came from.
type Origin int

// Origins, weakest first.
const (
	FromDefault Origin = iota
	FromFile
	FromEnv
	FromFlag
)

// Source is where one setting came from.
type Source struct {
	Origin Origin
	File   string // FromFile
	Line   int    // FromFile; 0 when not found
	Name   string // FromEnv: the variable; FromFlag: the flag, with dashes
}

func (s Source) String() string {
	switch s.Origin {
	case FromFile:
		if s.Line > 0 {
			return fmt.Sprintf("file:%s:%d", s.File, s.Line)
		}
		return "file:" + s.File
	case FromEnv:
		return "env " + s.Name
	case FromFlag:
		return "flag " + s.Name
	}
	return "default"
}

// Errors callers branch on.
var (
	// ErrInvalid: a setting has a bad value, or the file is not valid TOML.
	// The message names the file and line, the variable or the flag.
	ErrInvalid = errors.New("invalid configuration")
	// ErrFlag: the invalid value came from a command-line flag (a usage
	// error, where one in the file or environment is not). Such errors
	// are ErrInvalid too.
	ErrFlag = errors.New("invalid flag value")
)

// flagError marks an error as ErrFlag without changing its message.
type flagError struct{ error }

func (e flagError) Is(target error) bool { return target == ErrFlag }
func (e flagError) Unwrap() error        { return e.error }

// fromFlag marks err as ErrFlag when src is a flag.
func fromFlag(err error, src Source) error {
	if src.Origin == FromFlag {
		return flagError{err}
	}
	return err
}

// DefaultPath is the config file: $BONSAI_CONFIG_DIR/config.toml when that
// is set, else $XDG_CONFIG_HOME/bonsai/config.toml (~/.config on Linux).
// It creates the directory when it can, to show where the file goes; the
// file is only read, so a read-only directory is fine. The path is always
// the user's own (xdg.ConfigFile would answer with one in XDG_CONFIG_DIRS
// when the home directory cannot be written).
func DefaultPath() (string, error) {
	if dir := os.Getenv("BONSAI_CONFIG_DIR"); dir != "" {
		return filepath.Join(dir, "config.toml"), nil
	}
	if xdg.ConfigHome == "" {
		return "", errors.New("config path: no home directory")
	}
	dir := filepath.Join(xdg.ConfigHome, "bonsai")
	_ = os.MkdirAll(dir, 0o755)
	return filepath.Join(dir, "config.toml"), nil
}

// LoadOptions say where to look; the zero value reads the default file and
// the process environment, with no flags.
type LoadOptions struct {
	Path   string                          // "" means Flags.ConfigPath, else DefaultPath()
	Env    func(key string) (string, bool) // nil means os.LookupEnv
	Flags  *Flags                          // from RegisterFlags, after Parse; may be nil
	NoFile bool                            // skip the file (tests, --no-config)
}

// Load resolves the configuration: defaults < file < environment < flags.
// A missing file is not an error.
func Load(opts LoadOptions) (*Config, error) {
	c := Defaults()
	c.Sources = map[string]Source{}
	for _, s := range settings {
		c.Sources[s.key] = Source{Origin: FromDefault}
	}
	if !opts.NoFile {
		path := opts.Path
		if path == "" && opts.Flags != nil {
			path = opts.Flags.ConfigPath
		}
		if path == "" {
			p, err := DefaultPath()
			if err != nil {
				return nil, err
			}
			path = p
		}
		c.Path = path
		if err := c.readFile(path); err != nil {
			return nil, err
		}
	}
	env := opts.Env
	if env == nil {
		env = os.LookupEnv
	}
	for _, s := range settings {
		v, ok := env(s.env)
		if !ok || v == "" {
			continue
		}
		src := Source{Origin: FromEnv, Name: s.env}
		if err := s.set(&c, v); err != nil {
			return nil, fmt.Errorf("%s=%q: %w: %w", s.env, v, ErrInvalid, err)
		}
		c.Sources[s.key] = src
	}
	if opts.Flags != nil {
		if err := opts.Flags.apply(&c); err != nil {
			return nil, err
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// readFile overlays the TOML file at path, if it exists.
func (c *Config) readFile(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	md, err := toml.Decode(string(data), c)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s:%d:%d: %s: %w", path, pe.Position.Line, pe.Position.Col, pe.Message, ErrInvalid)
		}
		// Type mismatches are plain errors: "toml: line 3 (last key "threads"):
		// incompatible types: ...". Put them in the same file:line form.
		if m := typeErrorPattern.FindStringSubmatch(err.Error()); m != nil {
			return fmt.Errorf("%s:%s: %s: %s: %w", path, m[1], m[2], m[3], ErrInvalid)
		}
		return fmt.Errorf("%s: %w: %w", path, ErrInvalid, err)
	}
	lines := keyLines(data)
	for _, k := range md.Keys() {
		key := k.String()
		if md.Type(k...) == "Hash" {
			continue
		}
		c.Sources[key] = Source{Origin: FromFile, File: path, Line: lines[key]}
	}
	// Report the outermost unknown name only: an unknown table once, not
	// each key inside it.
	undecoded := md.Undecoded()
	unknown := map[string]bool{}
	for _, k := range undecoded {
		unknown[k.String()] = true
	}
	reported := map[string]bool{}
	for _, k := range undecoded {
		name := k.String()
		if hasUnknownParent(k, unknown) || reported[name] {
			continue
		}
		reported[name] = true
		switch md.Type(k...) {
		case "Hash":
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: unknown table [%s]", where(path, lines["["+name+"]"]), name))
		case "ArrayHash":
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: unknown table [[%s]]", where(path, lines["[["+name+"]]"]), name))
		default:
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: unknown key %q", where(path, lines[name]), name))
		}
	}
	return nil
}

// hasUnknownParent reports whether a table enclosing k is itself unknown.
func hasUnknownParent(k toml.Key, unknown map[string]bool) bool {
	for i := 1; i < len(k); i++ {
		if unknown[k[:i].String()] {
			return true
		}
	}
	return false
}

func where(path string, line int) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", path, line)
	}
	return path
}

var typeErrorPattern = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// keyLines maps each "table.key" (and "[table]" header) in a TOML document to
// its line number, for telling users where a value came from. BurntSushi/toml
// keeps key positions private, so scan the lines: good enough for the flat
// files bonsai uses, and a miss only loses the line number.
func keyLines(data []byte) map[string]int {
	out := map[string]int{}
	table := ""
	inMultiline := ""
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		t := strings.TrimSpace(line)
		if inMultiline != "" {
			if strings.Count(t, inMultiline)%2 == 1 {
				inMultiline = ""
			}
			continue
		}
		if t == "" || t[0] == '#' {
			continue
		}
		if strings.HasPrefix(t, "[[") {
			if end := strings.Index(t, "]]"); end > 2 {
				table = unquoteKey(t[2:end])
				if _, seen := out["[["+table+"]]"]; !seen {
					out["[["+table+"]]"] = n
				}
			}
			continue
		}
		if strings.HasPrefix(t, "[") {
			if end := strings.IndexByte(t, ']'); end > 1 {
				table = unquoteKey(t[1:end])
				out["["+table+"]"] = n
			}
			continue
		}
		eq := strings.IndexByte(t, '=')
		if eq <= 0 {
			continue
		}
		key := unquoteKey(t[:eq])
		if table != "" {
			key = table + "." + key
		}
		if _, seen := out[key]; !seen {
			out[key] = n
		}
		rest := t[eq+1:]
		for _, delim := range []string{`"""`, `'''`} {
			if strings.Count(rest, delim)%2 == 1 {
				inMultiline = delim
			}
		}
	}
	return out
}

func unquoteKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if u, err := strconv.Unquote(p); err == nil {
			p = u
		} else {
			p = strings.Trim(p, `'`)
		}
		parts[i] = p
	}
	return strings.Join(parts, ".")
}

// validate checks every setting's value and names its source on failure.
func (c *Config) validate() error {
	for _, s := range settings {
		// A TOML file may write nan and inf.
		if p, ok := s.field(c).(*float64); ok {
			if err := finite(*p); err != nil {
				return fromFlag(fmt.Errorf("%s = %s (%s): %w: %w", s.key, s.format(c), c.Sources[s.key], ErrInvalid, err), c.Sources[s.key])
			}
		}
		if s.check == nil {
			continue
		}
		if err := s.check(c); err != nil {
			return fromFlag(fmt.Errorf("%s = %s (%s): %w: %w", s.key, s.format(c), c.Sources[s.key], ErrInvalid, err), c.Sources[s.key])
		}
	}
	return nil
}

// Entry is one effective setting for display.
type Entry struct {
	Key    string
	Value  string // as TOML would write it
	Source Source
}

// Entries lists every setting with its value and source, in a fixed order,
// key overrides last.
func (c *Config) Entries() []Entry {
	var out []Entry
	for _, s := range settings {
		out = append(out, Entry{Key: s.key, Value: s.format(c), Source: c.Sources[s.key]})
	}
	names := make([]string, 0, len(c.Keys))
	for k := range c.Keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		out = append(out, Entry{Key: "keys." + k, Value: strconv.Quote(c.Keys[k]), Source: c.Sources["keys."+k]})
	}
	return out
}

// KVTypes are the KV cache types CacheTypeK and CacheTypeV name (checked
// when the configuration loads; an unknown name is an error here too).
func (c *Config) KVTypes() (infer.KVTypes, error) {
	k, err := infer.ParseKVType(c.CacheTypeK)
	if err != nil {
		return infer.KVTypes{}, fmt.Errorf("cache_type_k: %w", err)
	}
	v, err := infer.ParseKVType(c.CacheTypeV)
	if err != nil {
		return infer.KVTypes{}, fmt.Errorf("cache_type_v: %w", err)
	}
	return infer.KVTypes{K: k, V: v}, nil
}
