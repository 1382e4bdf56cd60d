// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"strings"
	"testing"
)

// FuzzParsePattern: any input either fails with a "pattern" error or gives
// at most MaxRequests requests in time order, each of cost ≥ 0.
func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"burst 6 at 0, then 1 every 100ms for 2s", "2 every 0.5 times 3; wait 1s, burst 1 cost 4", "burst 1 at 1.5", "wait", "1 every 1ns for 1h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		reqs, err := ParsePattern(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "pattern") {
				t.Fatalf("error %q does not start with pattern", err)
			}
			return
		}
		if len(reqs) == 0 || len(reqs) > MaxRequests {
			t.Fatalf("%d requests", len(reqs))
		}
		for i, r := range reqs {
			if r.Cost < 0 || i > 0 && r.At < reqs[i-1].At {
				t.Fatalf("request %d: %+v after %+v", i, r, reqs[max(i-1, 0)])
			}
		}
	})
}

func TestPatternTimeBounds(t *testing.T) {
	for _, s := range []string{"wait 4611686018s, wait 4611686018s, burst 1", "1 every 4611686018s times 3", "burst 1 at 4611686018, 1 every 1s for 4611686018"} {
		if _, err := ParsePattern(s); err == nil || !strings.Contains(err.Error(), "latest time") {
			t.Errorf("ParsePattern(%q) = %v, want an error about the latest time", s, err)
		}
	}
}
