// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestPolicyItem(t *testing.T) {
	for _, c := range []struct {
		p    sluice.Policy
		want string
	}{
		{sluice.Policy{Name: "a", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Minute}, `"a";q=100;w=60`},
		{sluice.Policy{Name: "b", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second, Burst: 50}, `"b";q=50;w=5`},
		{sluice.Policy{Name: "c", Algorithm: sluice.TokenBucket, Limit: 100, Period: time.Second, Burst: 10}, `"c";q=10;w=1`},
		{sluice.Policy{Name: "d", Algorithm: sluice.SlidingLog, Limit: 5, Period: 100 * time.Millisecond}, `"d";q=5;w=1`},
		{sluice.Policy{Name: "e", Algorithm: sluice.LeakyBucket, Limit: 2, Period: 3 * time.Second, Burst: 3}, `"e";q=3;w=5`}, // 4.5 s up
		{sluice.Policy{Name: `q"u\o`, Algorithm: sluice.SlidingWindow, Limit: sluice.MaxLimit, Period: sluice.MaxPeriod}, `"q\"u\\o";q=999999999999999;w=1152921505`},
	} {
		if err := c.p.Validate(); err != nil {
			t.Fatal(err)
		}
		got := policyItem(c.p)
		if got != c.want {
			t.Errorf("%v: %s; want %s", c.p, got, c.want)
		}
		items, err := parseSFList([]string{got})
		if err != nil || len(items) != 1 || items[0].value != c.p.Name {
			t.Errorf("%s does not parse back to %q: %v %v", got, c.p.Name, items, err)
		}
	}
}

func TestCeilSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		-time.Second: 0, 0: 0, 1: 1, time.Second - 1: 1, time.Second: 1, time.Second + 1: 2, 90 * time.Second: 90,
	} {
		if got := ceilSeconds(d); got != want {
			t.Errorf("ceilSeconds(%v) = %d; want %d", d, got, want)
		}
	}
}
