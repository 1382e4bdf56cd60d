// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// TestPolicyFloodBounded: a Store asked under 20,000 distinct sharded
// policies (a tenant's own limit built per request) remembers at most
// maxSets of them (it kept every one, for ever).
func TestPolicyFloodBounded(t *testing.T) {
	mem := memstore.New()
	defer mem.Close()
	s := New(mem, 2)
	ctx := context.Background()
	for i := range 20_000 {
		p := sluice.Policy{Name: fmt.Sprint("tenant-", i), Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}
		if d, err := s.Take(ctx, p, "k", 1); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	}
	n := 0
	s.sets.Range(func(any, any) bool { n++; return true })
	if n > maxSets {
		t.Errorf("%d sharded policies remembered after 20,000, want at most %d", n, maxSets)
	}
}
