// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/shard"
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
		s, err := New(c, WithClock(clock), WithPrefix(fmt.Sprintf("t%d:", harnessSeq.Add(1))))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Harness{Store: s, Clock: clock}
	})
}

// TestShardsCluster runs the shard oracle on a real 3-master Redis Cluster
// and checks that the shards of one key live on different masters.
func TestShardsCluster(t *testing.T) {
	t.Parallel()
	c := newClient(t, sluicetest.StartRedisCluster(t, 3)...)
	storetest.Shards(t, func(t *testing.T) storetest.Harness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s, err := New(c, WithClock(clock), WithPrefix(fmt.Sprintf("t%d:", harnessSeq.Add(1))))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Harness{Store: s, Clock: clock}
	})

	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	p := sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 3000, Period: time.Second}
	parts := shard.Policies(p, 3)
	owner := map[string]int{}
	for i, q := range parts {
		k := s.ShardKey(q, "hot", i, 3)
		state, _ := stateKey(s.prefix, "", policyTag(q), k)
		slot := keySlot(state)
		node, err := c.Do(context.Background(), c.B().ClusterKeyslot().Key(state).Build()).AsInt64()
		if err != nil || node != int64(slot) {
			t.Fatalf("CLUSTER KEYSLOT %q = %d, %v; keySlot says %d", state, node, err, slot)
		}
		owner[masterOf(t, c, slot)] = i
	}
	if len(owner) != 3 {
		t.Errorf("the 3 shards of one key live on %d masters, want 3: %v", len(owner), owner)
	}
}

// masterOf returns the address of the master serving slot, from CLUSTER
// SLOTS.
func masterOf(t *testing.T, c rueidis.Client, slot uint16) string {
	t.Helper()
	ranges, err := c.Do(context.Background(), c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			t.Fatalf("CLUSTER SLOTS: %v %v", f, err)
		}
		lo, _ := f[0].AsInt64()
		hi, _ := f[1].AsInt64()
		if lo <= int64(slot) && int64(slot) <= hi {
			m, _ := f[2].ToArray()
			host, _ := m[0].ToString()
			port, _ := m[1].AsInt64()
			return fmt.Sprintf("%s:%d", host, port)
		}
	}
	t.Fatalf("no master serves slot %d", slot)
	return ""
}

// TestGiveExpiry: a bucket Give gives the units back and leaves the key's
// expiry as it was (its epoch's end: bucket.lua), on Redis TIME (the
// default) and on an injected clock.
func TestGiveExpiry(t *testing.T) {
	t.Parallel()
	c := newClient(t, sluicetest.StartRedis(t))
	p := sluice.Policy{Name: "g", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second} // T = 100 ms
	clock := sluicetest.NewClock(time.Unix(1000, 0))
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"redis-time", nil},
		{"clock", []Option{WithClock(clock), WithPrefix("c:")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, c, tc.opts...)
			ctx := t.Context()
			_, stamp, err := s.TakeStamped(ctx, p, "k", 10) // TAT now + 1 s
			if err != nil {
				t.Fatal(err)
			}
			cc, err := s.compile(p)
			if err != nil {
				t.Fatal(err)
			}
			key, _ := stateKey(s.prefix, s.slot, cc.tag, "k")
			before, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := s.Give(ctx, p, "k", stamp, 9); err != nil || !ok {
				t.Fatalf("Give = %v, %v; want true", ok, err)
			}
			pttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			if pttl <= 0 || pttl > before {
				t.Errorf("PTTL after giving 9 of 10 units back = %d ms, want in (0, %d] (as it was)", pttl, before)
			}
			if d := take(t, s, p, "k", 0); d.Remaining != 9 {
				t.Errorf("after giving 9 of 10 units back: %+v, want 9 remaining", d)
			}
		})
	}
}
