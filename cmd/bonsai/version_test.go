package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// --version names the commit go build records, with whether the tree had
// changes; a build without one says why, rather than a bare "(devel)".
func TestVersionNamesTheCommit(t *testing.T) {
	stamped := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want []string
	}{
		{stamped("vcs.revision", "d587342f08c581970c868c48351ad24f9f4d64b6", "vcs.time", "2026-12-05T15:04:53Z", "vcs.modified", "false"),
			[]string{"commit d587342f08c5, 2026-12-05T15:04:53Z)", "go1.26.8"}},
		{stamped("vcs.revision", "d587342f08c581970c868c48351ad24f9f4d64b6", "vcs.modified", "true"), []string{"commit d587342f08c5+dirty"}},
		{stamped(), []string{"(devel)", "no commit recorded", "go build"}},
	} {
		got := versionOf(tc.bi)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("versionOf(%v) = %q, lacks %q", tc.bi.Settings, got, w)
			}
		}
	}
}
