// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

// liveSemaphores counts the semaphore keys under prefix that still have a
// holder whose expiry is after now (microseconds): with WithClock, keys stay
// in Redis for the expiry slack beyond that.
func liveSemaphores(t testing.TB, c rueidis.Client, prefix string, nowMicros int64) int {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Do(ctx, c.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	n := 0
	for _, k := range keys {
		cnt, err := c.Do(ctx, c.B().Zcount().Key(k).Min("("+strconv.FormatInt(nowMicros, 10)).Max("+inf").Build()).AsInt64()
		if err != nil {
			t.Fatalf("ZCOUNT %s: %v", k, err)
		}
		if cnt > 0 {
			n++
		}
	}
	return n
}

func TestSemaphoreConformance(t *testing.T) {
	t.Parallel()
	c := newClient(t, sluicetest.StartRedis(t))
	storetest.RunSemaphore(t, func(t *testing.T) storetest.SemaphoreHarness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		prefix := fmt.Sprintf("s%d:", harnessSeq.Add(1))
		s, err := New(c, WithClock(clock), WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.SemaphoreHarness{
			Semaphore: s,
			Clock:     clock,
			Len:       func() int { return liveSemaphores(t, c, prefix, clock.Now().UnixNano()/1000) },
		}
	})
}

// TestSemaphoreRedisTime checks the default store (Redis TIME): every
// semaphore key has a PEXPIRE no later than its last holder's expiry, and
// is gone once its holders are released.
func TestSemaphoreRedisTime(t *testing.T) {
	t.Parallel()
	addr := sluicetest.StartRedis(t)
	c := newClient(t, addr)
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i := range 3 {
		sl, err := s.Acquire(ctx, "api", "k", fmt.Sprint("h", i), 2, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if sl.Acquired != (i < 2) {
			t.Fatalf("acquire %d: %+v", i, sl)
		}
	}
	key := semaphoreKey("sluice:", "", "api", "k")
	pttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= 0 || pttl > 5000 {
		t.Fatalf("PTTL %s = %d, want in (0, 5000]", key, pttl)
	}
	if _, err := s.Extend(ctx, "api", "k", "h0", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if pttl, _ = c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64(); pttl <= 5000 || pttl > 30000 {
		t.Fatalf("after Extend PTTL = %d, want in (5000, 30000]", pttl)
	}
	for _, h := range []string{"h0", "h1"} {
		if _, err := s.Release(ctx, "api", "k", h); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := c.Do(ctx, c.B().Exists().Key(key).Build()).AsInt64(); n != 0 {
		t.Fatalf("key %s exists after every holder released", key)
	}
}

// TestSemaphoreConformanceCluster runs the suite on a real 3-master Redis
// Cluster: each semaphore is one hash-tagged key, so one script.
func TestSemaphoreConformanceCluster(t *testing.T) {
	t.Parallel()
	c := newClient(t, sluicetest.StartRedisCluster(t, 3)...)
	storetest.RunSemaphore(t, func(t *testing.T) storetest.SemaphoreHarness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s, err := New(c, WithClock(clock), WithPrefix(fmt.Sprintf("s%d:", harnessSeq.Add(1))))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.SemaphoreHarness{Semaphore: s, Clock: clock}
	})
}
