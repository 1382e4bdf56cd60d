// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestOverrideCacheRedis: a replica answers an override it has read from
// its own memory, and sees another client's write on its next read.
func TestOverrideCacheRedis(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	a, err := Open("redis://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open("redis://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if _, ok, err := b.Override(ctx, "d", "x"); ok || err != nil {
		t.Fatalf("before: %v %v", ok, err)
	}
	for round, spec := range []string{"gcra 5 60000000000 0", "gcra 7 60000000000 0"} {
		if _, err := a.SetOverride(ctx, "d", "x", spec, "rec"+spec); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := b.Override(ctx, "d", "x"); got != spec || !ok || err != nil {
			t.Fatalf("round %d: b reads %q %v %v, want %q", round, got, ok, err, spec)
		}
	}
	if rec, err := b.OverrideRecord(ctx, "d", "x"); rec != "recgcra 7 60000000000 0" || err != nil {
		t.Errorf("record: %q %v", rec, err)
	}
	if all, err := b.Overrides(ctx, "d"); len(all) != 1 || err != nil {
		t.Errorf("overrides: %v %v", all, err)
	}
	if prev, err := a.DeleteOverride(ctx, "d", "x"); prev != "recgcra 7 60000000000 0" || err != nil {
		t.Errorf("delete: %q %v", prev, err)
	}
	if _, ok, err := b.Override(ctx, "d", "x"); ok || err != nil {
		t.Errorf("after delete: %v %v", ok, err)
	}
}

// BenchmarkOverride compares what the decision path pays to read an
// override (cached: from this process's memory, as Override does) with a
// read from Redis each time and with a decision (Take).
func BenchmarkOverride(b *testing.B) {
	addr := sluicetest.StartRedis(b)
	s, err := Open("redis://" + addr)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	if _, err := s.SetOverride(ctx, "api", "tenant-1", "gcra 5 60000000000 0", "rec"); err != nil {
		b.Fatal(err)
	}
	b.Run("read=cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, err := s.Override(ctx, "api", "tenant-1"); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("read=redis", func(b *testing.B) {
		b.ReportAllocs()
		cn := s.conn.Load()
		_, key := s.overrideKeys("api", "tenant-1")
		for b.Loop() {
			if err := cn.client.Do(ctx, cn.client.B().Get().Key(key).Build()).Error(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("take", func(b *testing.B) {
		b.ReportAllocs()
		p := sluice.Policy{Name: "bench", Algorithm: sluice.GCRA, Limit: 1 << 40, Period: time.Second}
		for b.Loop() {
			if _, err := s.Take(ctx, p, "k", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// slowReads delays every read of its connection by delay (when set): a
// replica whose reader falls behind the invalidations Redis sent it.
type slowReads struct {
	net.Conn
	delay *atomic.Int64
}

func (c slowReads) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	time.Sleep(time.Duration(c.delay.Load())) // what came in waits
	return n, err
}

// TestOverrideBarrier: a replica whose connection delivers Redis's
// invalidation late (4 × OverrideSettle) still reads the new spec once
// SetOverride has returned elsewhere: Override's barrier round trip comes
// back only after the invalidation. Without the barrier it answers the
// stale spec from its cache.
func TestOverrideBarrier(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	a, err := Open("redis://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var delay atomic.Int64
	b, err := Open("redis://"+addr, WithConnWrapper(func(c net.Conn) net.Conn { return slowReads{c, &delay} }))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if _, err := a.SetOverride(ctx, "d", "x", "one", "r1"); err != nil {
		t.Fatal(err)
	}
	if got, _, err := b.Override(ctx, "d", "x"); got != "one" || err != nil {
		t.Fatalf("b reads %q %v", got, err)
	}
	delay.Store(int64(4 * OverrideSettle))
	if _, err := a.SetOverride(ctx, "d", "x", "two", "r2"); err != nil {
		t.Fatal(err)
	}
	if got, _, err := b.Override(ctx, "d", "x"); got != "two" || err != nil {
		t.Errorf("b, reading late, reads %q %v after the SetOverride returned, want two", got, err)
	}
}
