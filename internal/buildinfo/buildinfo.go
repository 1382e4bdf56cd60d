// SPDX-License-Identifier: Apache-2.0

// Package buildinfo names the build of sluice that is running, as `sluice
// version` prints it and the live page and GET /v1/status show it.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version returns what sluice was built from: the module version, and the
// VCS revision, commit time and whether the tree had uncommitted changes
// when the build recorded them (go build and go install in a checkout do;
// go run, -buildvcs=false and builds without .git do not).
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: no build information)"
	}
	return FromInfo(info)
}

// FromInfo is Version's rule, for any build information: "v1.2.3" for a
// tagged module (go install ...@v1.2.3), "(devel) revision 0123456789ab
// (2026-01-02T03:04:05Z, modified)" for a checkout build, and "(devel)"
// with a hint when the build recorded no revision.
func FromInfo(info *debug.BuildInfo) string {
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		if v == "(devel)" {
			v += " (no VCS revision recorded: built by go run, with -buildvcs=false, or outside a git checkout)"
		}
		return v
	}
	if short := rev[:min(len(rev), 12)]; !strings.Contains(v, short) {
		// A pseudo-version (go build since go1.24) names it already.
		v += " revision " + short
	}
	var notes []string
	if at != "" {
		notes = append(notes, at)
	}
	if modified {
		notes = append(notes, "modified")
	}
	if len(notes) > 0 {
		v += " (" + strings.Join(notes, ", ") + ")"
	}
	return v
}
