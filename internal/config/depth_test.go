// SPDX-License-Identifier: Apache-2.0

package config

import (
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

// nested is a valid file whose descriptors nest depth deep, in flow style
// (about 25 bytes a level), with a rule at the bottom.
func nested(depth int) string {
	var b strings.Builder
	b.WriteString("domain: deep\ndescriptors:\n")
	for range depth - 1 {
		b.WriteString("  [{key: a, descriptors: ")
	}
	b.WriteString("  [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]")
	for range depth - 1 {
		b.WriteString("}]")
	}
	b.WriteString("\n")
	return b.String()
}

// TestDepthBounded: a file nested deeper than MaxDepth is refused with its
// file and line, and parsing it costs memory in proportion to the file: a
// 122 KiB file nested 4,999 deep allocated about 1.2 GiB (the parser copied
// every level's path and field name at every level below it).
func TestDepthBounded(t *testing.T) {
	src := nested(4999)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Load(fstest.MapFS{"deep.yaml": {Data: []byte(src)}})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "deep.yaml:3: ") || !strings.Contains(err.Error(), "nested deeper than 64 levels") {
		t.Errorf("4,999 deep: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 200*uint64(len(src)) {
		t.Errorf("4,999 deep (%d bytes): %d bytes allocated, more than 200 per byte of the file", len(src), alloc)
	}
	// MaxDepth itself loads, and its rule matches.
	c, err := Load(fstest.MapFS{"deep.yaml": {Data: []byte(nested(MaxDepth))}})
	if err != nil {
		t.Fatalf("%d deep: %v", MaxDepth, err)
	}
	entries := make([]Entry, MaxDepth)
	for i := range entries {
		entries[i] = Entry{Key: "a", Value: "x"}
	}
	if r := c.Match("deep", entries); r == nil {
		t.Errorf("%d deep: no rule matches", MaxDepth)
	}
	if _, err := Load(fstest.MapFS{"deep.yaml": {Data: []byte(nested(MaxDepth + 1))}}); err == nil {
		t.Errorf("%d deep loaded", MaxDepth+1)
	}
}

// TestWarnings: a leaky-bucket rule (a meter over RLS, not a queue) and an
// in-flight rule (not applied over RLS) each get one line naming file and
// line; other rules none.
func TestWarnings(t *testing.T) {
	c := mustLoad(t, `domain: d
descriptors:
  - key: gps
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: leaky-bucket, burst: 20}
  - key: work
    rate_limit: {algorithm: concurrency, requests_per_unit: 2}
  - key: user
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: none
    rate_limit: {unlimited: true}
`)
	w := c.Warnings()
	if len(w) != 2 || !strings.Contains(w[0], ":4: d.gps: leaky-bucket over RLS is a meter, not a queue") || !strings.Contains(w[1], ":6: d.work: an in-flight rule applies in gateway mode only") {
		t.Errorf("warnings:\n%s", strings.Join(w, "\n"))
	}
}
