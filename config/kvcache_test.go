package config

import (
	"errors"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
)

// The cache types come from the file, the environment and the flags like
// every setting, and reach infer as KVTypes; a name llama.cpp has but bonsai
// does not store is refused where it was written.
func TestCacheTypes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  string
		env   map[string]string
		flags []string
		want  infer.KVTypes
		bad   bool
	}{
		{name: "default", want: infer.KVTypes{}},
		{name: "file", file: "cache_type_k = \"q8_0\"\n", want: infer.KVTypes{K: infer.KVQ8_0}},
		{name: "env over file", file: "cache_type_v = \"f16\"\n", env: map[string]string{"BONSAI_CACHE_TYPE_V": "q8_0"}, want: infer.KVTypes{V: infer.KVQ8_0}},
		{name: "flags over env", env: map[string]string{"BONSAI_CACHE_TYPE_K": "q8_0"}, flags: []string{"--cache-type-k", "f16", "--cache-type-v", "q8_0"}, want: infer.KVTypes{V: infer.KVQ8_0}},
		{name: "unknown in file", file: "cache_type_k = \"q4_0\"\n", bad: true},
		{name: "unknown in env", env: map[string]string{"BONSAI_CACHE_TYPE_V": "bf16"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := LoadOptions{Path: writeConfig(t, tc.file), Env: envOf(tc.env), Flags: parseFlags(t, tc.flags...)}
			c, err := Load(o)
			if tc.bad {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("Load: %v, want an error wrapping ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.KVTypes()
			if err != nil || got != tc.want {
				t.Errorf("KVTypes() = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
