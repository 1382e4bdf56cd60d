// SPDX-License-Identifier: Apache-2.0

package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromInfo(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"go install at a tag", "v0.4.1", nil, "v0.4.1"},
		{"a checkout, clean", "(devel)",
			vcs("vcs", "git", "vcs.revision", "1b40f8a2c3d4e5f60718293a4b5c6d7e8f901234", "vcs.time", "2026-11-26T01:02:03Z", "vcs.modified", "false"),
			"(devel) revision 1b40f8a2c3d4 (2026-11-26T01:02:03Z)"},
		{"a checkout with changes", "v0.0.0-20261126010203-1b40f8a2c3d4+dirty",
			vcs("vcs.revision", "1b40f8a2c3d4e5f60718293a4b5c6d7e8f901234", "vcs.time", "2026-11-26T01:02:03Z", "vcs.modified", "true"),
			"v0.0.0-20261126010203-1b40f8a2c3d4+dirty (2026-11-26T01:02:03Z, modified)"},
		{"a short revision, no time", "", vcs("vcs.revision", "abc"), "(devel) revision abc"},
		{"go run", "(devel)", nil, "(devel) (no VCS revision recorded: built by go run, with -buildvcs=false, or outside a git checkout)"},
	} {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/sluicehq/sluice", Version: c.version}, Settings: c.settings}
		if got := FromInfo(info); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
