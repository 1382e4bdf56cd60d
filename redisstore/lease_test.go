package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

// TestLeases runs the lease oracle on a real Redis: three leasing replicas
// over one Redis never admit what the exact model refuses, and the unspent
// units go back through give.lua.
func TestLeases(t *testing.T) {
	t.Parallel()
	c := newClient(t, sluicetest.StartRedis(t))
	storetest.Leases(t, func(t *testing.T) storetest.Harness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s, err := New(c, WithClock(clock), WithPrefix(fmt.Sprintf("t%d:", harnessSeq.Add(1))), WithTimeout(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Harness{Store: s, Clock: clock}
	})
}
