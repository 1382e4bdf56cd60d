// SPDX-License-Identifier: Apache-2.0

package muxcheck

import (
	"net/http"
	"strings"
	"testing"
)

// TestAdd: a pattern that parses and conflicts with nothing is taken; a
// bad one is refused with the parse error; a conflicting one names the
// earlier pattern and why, and no source line.
func TestAdd(t *testing.T) {
	mux := http.NewServeMux()
	var prior []string
	for _, c := range []struct {
		pattern  string
		ok       bool
		conflict int
		why      string
	}{
		{"GET /a/{x}", true, 0, ""},
		{"/b", true, 0, ""},
		{"GET /a/{x}", false, 0, "both match the same requests."},
		{"GET /a/{y}", false, 0, "both match the same requests."},
		{"GET /{y}/b", false, 0, `both match some paths, like "/a/b".`},
		{"GET /{x", false, -1, `parsing "GET /{x": at offset 5: bad wildcard segment (must end with '}')`},
	} {
		r, ok := Add(mux, http.NotFoundHandler(), c.pattern, prior)
		if ok != c.ok || !ok && (r.Conflict != c.conflict || r.Why != c.why) {
			t.Errorf("Add(%q) = %+v, %v; want %v, conflict %d, why %q", c.pattern, r, ok, c.ok, c.conflict, c.why)
		}
		if strings.Contains(r.Why, ".go:") {
			t.Errorf("Add(%q): %q names a source line", c.pattern, r.Why)
		}
		if ok {
			prior = append(prior, c.pattern)
		}
	}
}
