// SPDX-License-Identifier: Apache-2.0

package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestPolicyFloodBounded: a Store asked under 20,000 distinct policies (a
// tenant's own limit built per request) keeps at most lease.maxTables
// tables (it kept one per policy, for ever); a policy whose table holds a
// live block keeps deciding exactly from the store.
func TestPolicyFloodBounded(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	mem := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	defer mem.Close()
	s := lease.New(mem, lease.WithClock(clock))
	ctx := context.Background()
	hot := sluice.Policy{Name: "hot", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute}
	admitted := 0
	for i := range 20_000 {
		p := sluice.Policy{Name: fmt.Sprint("tenant-", i), Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}
		if _, err := s.Take(ctx, p, "k", 1); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 0 {
			clock.Advance(time.Millisecond)
			d, err := s.Take(ctx, hot, "k", 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
		}
	}
	if n, most := lease.Tables(s); n > most {
		t.Errorf("%d lease tables after 20,000 policies, want at most %d", n, most)
	}
	if admitted != 10 {
		t.Errorf("the hot policy admitted %d of 20 in its window, want its limit, 10", admitted)
	}
}
