// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// traceParams are the policy parameters the Model subtests run every
// algorithm with. Burst applies to the bucket kinds only.
var traceParams = []struct {
	limit  int64
	period time.Duration
	burst  int64
}{
	{3, time.Second, 0},                 // emission interval 333333333⅓ns
	{7, time.Minute, 0},                 // 8571428571³⁄₇ns
	{5, time.Second, 10},                // burst above the limit
	{1000, time.Hour, 1},                // burst 1: a pure pacer
	{7, time.Minute, 3},                 // burst below a fractional limit
	{3, 7 * time.Nanosecond, 2},         // a tiny period
	{1, 90 * 24 * time.Hour, 4},         // a huge period
	{100, time.Minute, 0},               // the seeds' scale
	{1 << 40, 24 * time.Hour, 1 << 41},  // very large values
	{999_999_937, time.Second, 0},       // a prime limit per second
	{1 << 50, time.Nanosecond, 1 << 55}, // very large rate and burst
}

// traceLen is the number of requests per Model subtest.
const traceLen = 2500

// traceKeys are the keys the traces use: the first one most.
var traceKeys = []string{"rider:42", "", "{tag}:x", "ключ 🔑", strings.Repeat("k", 300)}

func testModel(t *testing.T, newHarness func(t *testing.T) Harness) {
	for ai, alg := range sluice.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			seen := map[sluice.Policy]bool{}
			for pi, tp := range traceParams {
				p := policyFor(alg, tp.limit, tp.period, tp.burst)
				if seen[p] {
					continue // a burst the window kinds don't have
				}
				seen[p] = true
				name := fmt.Sprintf("%dper%v", p.Limit, p.Period)
				if alg.IsBucket() && p.Burst != 0 {
					name += fmt.Sprintf("_burst%d", p.Burst)
				}
				seed := uint64(ai*100 + pi)
				t.Run(name, func(t *testing.T) {
					start := int64(epoch)
					if pi%2 == 1 {
						start = later
					}
					runTrace(t, newHarness, p, start, seed)
				})
			}
		})
	}
}

// traced is one request of a trace, kept for failure messages.
type traced struct {
	i    int
	key  string
	at   int64
	cost int64
	want sluice.Decision
}

// runTrace runs a random, tie-heavy trace of traceLen requests under p.
func runTrace(t *testing.T, newHarness func(t *testing.T) Harness, p sluice.Policy, start int64, seed uint64) {
	r := newRig(t, newHarness, start)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	burst := capacity(p)
	period := int64(p.Period)
	interval := max(period/p.Limit, 1) // the emission interval, rounded down
	// retryAt[key] is the instant the last rejection on key said to retry at.
	retryAt := map[string]int64{}
	var history []traced
	now := start
	for i := range traceLen {
		key := traceKeys[0]
		if rng.IntN(3) == 0 {
			key = traceKeys[rng.IntN(len(traceKeys))]
		}
		// The next instant: mostly ties and exact instants.
		next := now
		switch x := rng.IntN(100); {
		case x < 35: // the same instant
		case x < 45:
			next += 1 + rng.Int64N(3)
		case x < 60: // exactly when the last rejection said, or a ns either side
			if at, ok := retryAt[key]; ok {
				next = at + rng.Int64N(3) - 1
			}
		case x < 70: // a window boundary, or a ns either side
			next = (now/period+1)*period + rng.Int64N(3) - 1
		case x < 75: // the instant the key's state expires, or a ns before
			next = r.o.expiresAt(p, key) - rng.Int64N(2)
		case x < 85: // a few emission intervals, exactly
			k := 1 + rng.Int64N(4)
			next += k * interval
			if period%p.Limit != 0 && rng.IntN(2) == 0 {
				next += k * (period % p.Limit) / p.Limit // then the exact floor of k·P/N
			}
		case x < 95:
			next += rng.Int64N(3 * interval)
		default:
			next += rng.Int64N(2 * period)
		}
		now = max(now, min(next, model.MaxTime))
		var cost int64
		switch x := rng.IntN(100); {
		case x < 12:
			cost = 0
		case x < 45:
			cost = 1
		case x < 65:
			cost = 1 + rng.Int64N(burst)
		case x < 78:
			cost = 1 + rng.Int64N(min(burst, 5))
		case x < 88:
			cost = burst
		case x < 94:
			cost = burst + 1
		default:
			cost = burst + 1 + rng.Int64N(burst)
		}
		r.at(now)
		want := r.o.take(p, key, now, cost)
		history = append(history, traced{i, key, now - start, cost, want})
		got := r.take(p, key, cost)
		if got != want {
			var b strings.Builder
			fmt.Fprintf(&b, "%v, seed %d, start %s: request %d (key %q, cost %d, at start+%dns):\n got  %s\n want %s\nearlier requests on this key (at is since start):",
				p, seed, fmtTime(start), i, key, cost, now-start, fmtDecision(got), fmtDecision(want))
			n := 0
			for j := len(history) - 2; j >= 0 && n < 12; j-- {
				if h := history[j]; h.key == key {
					fmt.Fprintf(&b, "\n  #%d at %dns cost %d: %s", h.i, h.at, h.cost, fmtDecision(h.want))
					n++
				}
			}
			t.Fatal(b.String())
		}
		if !want.Allowed && !want.Impossible {
			retryAt[key] = now + int64(want.RetryAfter)
		}
	}
}
