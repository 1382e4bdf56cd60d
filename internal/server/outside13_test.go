// SPDX-License-Identifier: Apache-2.0

package server

import (
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// TestOutside13UnmatchedKeysBounded: the live page's record of the last
// request that matched no rule keeps its descriptors' keys, "each key cut
// to MaxLabelValueBytes and at most 8 descriptors: the values are left out
// (they are the unbounded part)" (unmatched.go:43-45). But a descriptor's
// entries are not bounded: one unmatched RLS request of one descriptor with
// 40,000 entries leaves a LastKeys of megabytes per domain label, served
// by GET /v1/rules on every poll of the live page and written whole in the
// warning logged each second.
func TestOutside13UnmatchedKeysBounded(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	d := &rlcommon.RateLimitDescriptor{}
	key := strings.Repeat("k", MaxLabelValueBytes)
	for range 40_000 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: key, Value: "v"})
	}
	h.should(t, "rides", d)
	for _, u := range h.srv.unmatchedList() {
		if len(u.LastKeys) > 64<<10 {
			t.Errorf("domain %q: LastKeys holds %d bytes after one request of %d entries; want it bounded whatever the request (under 64 KiB)",
				u.Domain, len(u.LastKeys), len(d.Entries))
		}
	}
}
