// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestShorterVariantKeepsCount: a fixed-window key at its limit under a
// policy of 4 per 3 s is not forgotten because a policy of the same name
// with a shorter period (1 per 1 s), whose window has moved on, read it (a
// peek, a refusal, a TakeAll), or a sweep ran while the shorter one was the
// name's current parameters: the next request under the first policy, in
// the same 3 s window, is refused, as on Redis (whose key keeps its
// writer's expiry) and in the model. (Keeping a state the shorter policy
// wrote for the longer period errs the other way, safely: the longer
// policy may count what Redis would have let expire, never less.)
func TestShorterVariantKeepsCount(t *testing.T) {
	long := sluice.Policy{Name: "n", Algorithm: sluice.FixedWindow, Limit: 4, Period: 3 * time.Second}
	short := sluice.Policy{Name: "n", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}
	w := time.Unix(1_700_000_001, 0) // a multiple of 3 s
	ctx := context.Background()
	for name, read := range map[string]func(s *Store){
		"peek":    func(s *Store) { s.Take(ctx, short, "x", 0) },
		"refusal": func(s *Store) { s.Take(ctx, short, "x", 2) },
		"TakeAll": func(s *Store) {
			s.TakeAll(ctx, []sluice.Request{{Policy: short, Key: "x", Cost: 0}, {Policy: short, Key: "y", Cost: 0}}, make([]sluice.Decision, 2))
		},
		"sweep": func(s *Store) {
			if d, err := s.Take(ctx, short, "other", 1); err != nil || !d.Allowed {
				t.Fatalf("take under the short policy: %+v, %v", d, err)
			}
			s.Sweep()
		},
	} {
		t.Run(name, func(t *testing.T) {
			clock := sluicetest.NewClock(w.Add(100 * time.Millisecond))
			s := New(WithClock(clock), WithSweepInterval(0))
			defer s.Close()
			if d, err := s.Take(ctx, long, "x", 4); err != nil || !d.Allowed {
				t.Fatalf("take 4: %+v, %v", d, err)
			}
			clock.Set(w.Add(1500 * time.Millisecond))
			read(s)
			if d, err := s.Take(ctx, long, "x", 1); err != nil || d.Allowed {
				t.Fatalf("a fifth unit in one window of limit 4: %+v, %v; want refused", d, err)
			}
			// Keys are kept for the longest period the name has had (here
			// 3 s from the latest window start, w+1 s), then they go.
			clock.Set(w.Add(4 * time.Second))
			s.Sweep()
			if n := s.Len(); n != 0 {
				t.Fatalf("%d keys held after every window is over, want 0", n)
			}
		})
	}
}
