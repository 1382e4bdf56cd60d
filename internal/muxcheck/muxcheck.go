// SPDX-License-Identifier: Apache-2.0

// Package muxcheck registers http.ServeMux patterns and says why ServeMux
// refuses one in terms of the patterns alone. ServeMux panics instead, and
// its message names the source line that called Handle: a line of sluice,
// not of the configuration the user wrote (httplimit's Route calls, the
// gateway's rule files), which the callers name themselves.
package muxcheck

import (
	"fmt"
	"net/http"
	"strings"
)

// Refusal is why ServeMux refused a pattern.
type Refusal struct {
	// Conflict is the index, in the patterns registered before, of the
	// one the pattern conflicts with; -1 when the pattern does not parse
	// (or conflicts with a pattern they leave out).
	Conflict int
	// Why is ServeMux's reason, without the source lines it names: the
	// parse error (`parsing "x": ...`), or for a conflict `both match some
	// paths, like "/a/b".` or `both match the same requests.`
	Why string
}

// Add registers pattern in mux with h. prior are the patterns mux holds,
// in the order they were added. It reports whether mux took the pattern,
// and if not, why.
func Add(mux *http.ServeMux, h http.Handler, pattern string, prior []string) (Refusal, bool) {
	p := handle(mux, h, pattern)
	if p == nil {
		return Refusal{}, true
	}
	if alone := handle(http.NewServeMux(), h, pattern); alone != nil {
		// It does not parse: the message names no source line.
		line, _, _ := strings.Cut(fmt.Sprint(alone), "\n")
		return Refusal{Conflict: -1, Why: line}, false
	}
	for j, prev := range prior {
		pair := http.NewServeMux()
		if handle(pair, h, prev) != nil {
			continue
		}
		if p := handle(pair, h, pattern); p != nil {
			return Refusal{Conflict: j, Why: conflictWhy(p)}, false
		}
	}
	// A conflict with a pattern prior left out.
	return Refusal{Conflict: -1, Why: conflictWhy(p)}, false
}

// handle registers pattern in mux and returns what ServeMux panicked with,
// or nil.
func handle(mux *http.ServeMux, h http.Handler, pattern string) (p any) {
	defer func() { p = recover() }()
	mux.Handle(pattern, h)
	return nil
}

// conflictWhy is what ServeMux's conflict message p says of the two
// patterns, without the source lines it names.
func conflictWhy(p any) string {
	for _, line := range strings.Split(fmt.Sprint(p), "\n") {
		if _, after, ok := strings.Cut(line, " both match "); ok {
			return "both match " + after
		}
		if strings.Contains(line, " matches the same requests as ") {
			return "both match the same requests."
		}
	}
	// ServeMux's rule, should its message change.
	return "both match some paths, and neither is more specific."
}
