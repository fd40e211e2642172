package config

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"

	"github.com/bonsai-chat/bonsai/infer"
)

// setting is one configurable value: its TOML key, environment variable,
// flag, and where it lives in Config.
type setting struct {
	key   string
	env   string
	flag  string // without dashes; "" when there is no flag
	usage string
	field func(*Config) any // pointer to the field: *string, *int, *int64, *float64 or *bool
	check func(*Config) error
}

var settings = []setting{
	{key: "model", env: "BONSAI_MODEL", flag: "model", usage: "GGUF model `file`",
		field: func(c *Config) any { return &c.Model }},
	{key: "backend", env: "BONSAI_BACKEND", flag: "backend", usage: "compute backend: cpu, gpu or auto",
		field: func(c *Config) any { return &c.Backend },
		check: func(c *Config) error { return oneOf(c.Backend, "cpu", "gpu", "auto") }},
	{key: "adapter", env: "BONSAI_ADAPTER", flag: "adapter", usage: "GPU adapter `name` (substring match)",
		field: func(c *Config) any { return &c.Adapter }},
	{key: "threads", env: "BONSAI_THREADS", flag: "threads", usage: "CPU threads (0: all cores)",
		field: func(c *Config) any { return &c.Threads },
		check: func(c *Config) error {
			return between(float64(c.Threads), 0, float64(infer.MaxThreads(runtime.NumCPU())))
		}},
	{key: "context_size", env: "BONSAI_CTX", flag: "ctx", usage: "context size in tokens (0: 4096, capped by the model's trained context)",
		field: func(c *Config) any { return &c.ContextSize },
		check: func(c *Config) error {
			if c.ContextSize == 0 {
				return nil
			}
			// The model's trained context is checked when it loads; this
			// bound only catches what no model has.
			return between(float64(c.ContextSize), 16, maxContext)
		}},
	{key: "cache_type_k", env: "BONSAI_CACHE_TYPE_K", flag: "cache-type-k", usage: "KV cache type for K: f16 or q8_0",
		field: func(c *Config) any { return &c.CacheTypeK },
		check: func(c *Config) error { return oneOf(c.CacheTypeK, infer.KVTypeNames...) }},
	{key: "cache_type_v", env: "BONSAI_CACHE_TYPE_V", flag: "cache-type-v", usage: "KV cache type for V: f16 or q8_0",
		field: func(c *Config) any { return &c.CacheTypeV },
		check: func(c *Config) error { return oneOf(c.CacheTypeV, infer.KVTypeNames...) }},
	{key: "think", env: "BONSAI_THINK", flag: "think", usage: "let the model think before answering",
		field: func(c *Config) any { return &c.Think }},
	{key: "theme", env: "BONSAI_THEME", flag: "", usage: "colour theme: auto, dark or light",
		field: func(c *Config) any { return &c.Theme },
		check: func(c *Config) error { return oneOf(c.Theme, "auto", "dark", "light") }},
	{key: "system_prompt", env: "BONSAI_SYSTEM_PROMPT", flag: "system", usage: "system prompt `text`",
		field: func(c *Config) any { return &c.SystemPrompt }},
	{key: "spec", env: "BONSAI_SPEC", flag: "spec", usage: "speculative decoding: auto, ngram (prompt lookup), draft (--draft model) or off",
		field: func(c *Config) any { return &c.Spec },
		check: func(c *Config) error { return oneOf(c.Spec, "auto", "ngram", "draft", "off") }},
	{key: "draft", env: "BONSAI_DRAFT", flag: "draft", usage: "draft model `file` for speculative decoding (same vocabulary as the model)",
		field: func(c *Config) any { return &c.Draft }},
	{key: "serve.cors", env: "BONSAI_CORS", flag: "", usage: "web `origins` allowed to call `bonsai serve` from a browser, comma-separated (\"*\": any); off by default",
		field: func(c *Config) any { return &c.Serve.CORS }},
	{key: "resume_cache_mb", env: "BONSAI_RESUME_CACHE_MB", flag: "", usage: "megabytes of saved model state that let a resumed chat skip re-reading it (0: none)",
		field: func(c *Config) any { return &c.ResumeCacheMB },
		check: func(c *Config) error { return atLeast(float64(c.ResumeCacheMB), 0) }},
	{key: "sampling.temperature", env: "BONSAI_TEMPERATURE", flag: "temp", usage: "sampling temperature (0: greedy)",
		field: func(c *Config) any { return &c.Sampling.Temperature },
		check: func(c *Config) error { return atLeast(c.Sampling.Temperature, 0) }},
	{key: "sampling.top_k", env: "BONSAI_TOP_K", flag: "top-k", usage: "keep the k most likely tokens (0: off)",
		field: func(c *Config) any { return &c.Sampling.TopK },
		check: func(c *Config) error { return atLeast(float64(c.Sampling.TopK), 0) }},
	{key: "sampling.top_p", env: "BONSAI_TOP_P", flag: "top-p", usage: "nucleus sampling mass (1: off)",
		field: func(c *Config) any { return &c.Sampling.TopP },
		check: func(c *Config) error { return probability(c.Sampling.TopP, false) }},
	{key: "sampling.min_p", env: "BONSAI_MIN_P", flag: "min-p", usage: "drop tokens below min-p × the top probability (0: off)",
		field: func(c *Config) any { return &c.Sampling.MinP },
		check: func(c *Config) error { return probability(c.Sampling.MinP, true) }},
	{key: "sampling.repeat_penalty", env: "BONSAI_REPEAT_PENALTY", flag: "repeat-penalty", usage: "penalty for repeated tokens (1: off)",
		field: func(c *Config) any { return &c.Sampling.RepeatPenalty },
		check: func(c *Config) error {
			if c.Sampling.RepeatPenalty <= 0 {
				return errors.New("must be positive")
			}
			return nil
		}},
	{key: "sampling.repeat_last_n", env: "BONSAI_REPEAT_LAST_N", flag: "", usage: "how many recent tokens the repeat penalty looks at",
		field: func(c *Config) any { return &c.Sampling.RepeatLastN },
		check: func(c *Config) error { return between(float64(c.Sampling.RepeatLastN), 0, maxRepeatLastN) }},
	{key: "sampling.seed", env: "BONSAI_SEED", flag: "seed", usage: "sampling seed (-1: random per reply)",
		field: func(c *Config) any { return &c.Sampling.Seed },
		check: func(c *Config) error { return atLeast(float64(c.Sampling.Seed), -1) }},
}

// set parses text into the setting's field.
func (s setting) set(c *Config, text string) error {
	switch p := s.field(c).(type) {
	case *string:
		*p = text
	case *int:
		v, err := strconv.Atoi(text)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		*p = v
	case *int64:
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		*p = v
	case *float64:
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return fmt.Errorf("not a number")
		}
		if err := finite(v); err != nil {
			return err
		}
		*p = v
	case *bool:
		v, err := strconv.ParseBool(text)
		if err != nil {
			return fmt.Errorf("not a boolean (true or false)")
		}
		*p = v
	default:
		panic(fmt.Sprintf("config: setting %s has unsupported field type %T", s.key, p))
	}
	return nil
}

// format writes the setting's value as TOML would.
func (s setting) format(c *Config) string {
	switch p := s.field(c).(type) {
	case *string:
		return strconv.Quote(*p)
	case *int:
		return strconv.Itoa(*p)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *float64:
		return strconv.FormatFloat(*p, 'g', -1, 64)
	case *bool:
		return strconv.FormatBool(*p)
	}
	return fmt.Sprint(s.field(c))
}

func (s setting) isBool() bool {
	_, ok := s.field(&Config{}).(*bool)
	return ok
}

func oneOf(v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("must be one of %q", allowed)
}

// maxContext is the largest context_length a model file may declare.
const maxContext = 1 << 30

// maxRepeatLastN bounds the repeat penalty's window (the sampler keeps that
// many token ids): far beyond any context bonsai can hold in memory.
const maxRepeatLastN = 1 << 20

// finite refuses NaN and the infinities, which every comparison-based check
// would let through (NaN < 0 is false) and the sampler then fails on.
func finite(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return errors.New("must be a finite number")
	}
	return nil
}

func between(v, lo, hi float64) error {
	if v < lo || v > hi {
		return fmt.Errorf("must be between %s and %s", strconv.FormatFloat(lo, 'f', -1, 64), strconv.FormatFloat(hi, 'f', -1, 64))
	}
	return nil
}

func atLeast(v, min float64) error {
	if v < min {
		return fmt.Errorf("must be at least %g", min)
	}
	return nil
}

func probability(v float64, zeroOK bool) error {
	if v > 1 || v < 0 || (v == 0 && !zeroOK) {
		if zeroOK {
			return errors.New("must be between 0 and 1")
		}
		return errors.New("must be above 0 and at most 1")
	}
	return nil
}

// EnvNames are the BONSAI_* variables Load reads, in the settings' order.
func EnvNames() []string {
	names := make([]string, len(settings))
	for i, s := range settings {
		names[i] = s.env
	}
	return append(names, "BONSAI_CONFIG_DIR")
}
