// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// FuzzLoad: any file content loads or fails with errors that each name the
// file; it never panics, and a loaded configuration's rules are valid.
func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"testdata/envoy", "testdata/envoy-2026", "defaults"} {
		names, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(b))
		}
	}
	f.Add("domain: d\ndescriptors:\n  - key: a\n    value: x*\n    rate_limit: {period: 1ms, requests_per_unit: 9, algorithm: gcra, burst: 1}\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Load(fstest.MapFS{"f.yaml": {Data: []byte(s)}})
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml") {
					t.Fatalf("error line %q does not name the file", line)
				}
			}
			return
		}
		for _, r := range c.Rules() {
			if r.Unlimited || r.Deny {
				continue
			}
			if err := r.Policy.Validate(); err != nil {
				t.Fatalf("loaded an invalid policy: %v", err)
			}
		}
	})
}
