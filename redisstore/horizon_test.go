// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// pttl returns key's PTTL in milliseconds.
func pttl(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	ms, err := c.Do(t.Context(), c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return ms
}

// TestBucketExpiryHeadroom: bucket.lua sets a key's expiry to its TAT plus
// the burst's duration, leaves it alone while later TATs stay within it, and
// moves it when one does not; the key always outlives its TAT.
func TestBucketExpiryHeadroom(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	clock := sluicetest.NewClock(time.Unix(1_700_000_000, 0))
	s := newStore(t, c, WithClock(clock), WithExpirySlack(0))
	// T = 100 ms, burst 30: dur(burst) = 3 s.
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second, Burst: 30}
	key, _ := stateKey(s.prefix, s.slot, policyTag(p), "k")

	take(t, s, p, "k", 1) // TAT now+100ms: expiry now+100ms+3s
	first := pttl(t, c, key)
	if first <= 3000 || first > 3100 {
		t.Fatalf("PTTL after the first take = %d ms, want in (3000, 3100]", first)
	}
	take(t, s, p, "k", 29) // TAT now+3s, within the expiry: left alone
	if got := pttl(t, c, key); got > first || got < 3000 {
		t.Fatalf("PTTL after a take within the headroom = %d ms, want in [3000, %d] (unchanged)", got, first)
	}
	clock.Advance(200 * time.Millisecond)
	take(t, s, p, "k", 2) // TAT now+3s = start+3.2s, past it: now+3s+3s
	if got := pttl(t, c, key); got <= 5900 || got > 6000 {
		t.Fatalf("PTTL after a take past the headroom = %d ms, want in (5900, 6000]", got)
	}
}

// TestBucketExpiryOtherWriters: a write that does not keep bucket.lua's
// record of the expiry (take.lua's general path, a lease's give-back, or an
// older sluice that knows no such record) makes the next decision set the
// expiry again, so the key still outlives its TAT.
func TestBucketExpiryOtherWriters(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	clock := sluicetest.NewClock(time.Unix(1_700_000_000, 0))
	s := newStore(t, c, WithClock(clock), WithExpirySlack(0))
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second, Burst: 30}
	ctx := t.Context()
	for _, w := range []struct {
		name  string
		write func(key, k string)
	}{
		{"take.lua", func(key, k string) {
			// Two requests on one key go to take.lua, which sets the expiry
			// to the TAT: now+300ms.
			if err := s.TakeAll(ctx, []sluice.Request{{Policy: p, Key: k, Cost: 1}, {Policy: p, Key: k, Cost: 1}}, make([]sluice.Decision, 2)); err != nil {
				t.Fatal(err)
			}
		}},
		{"older sluice", func(key, k string) {
			// What an older bucket.lua writes: the TAT, and an expiry at it.
			tat := clock.Now().Add(300 * time.Millisecond).UnixNano()
			ts := strconv.FormatInt(tat, 10)
			if err := c.Do(ctx, c.B().Hset().Key(key).FieldValue().FieldValue("t", ts).FieldValue("x", ts).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if err := c.Do(ctx, c.B().Pexpire().Key(key).Milliseconds(300).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(w.name, func(t *testing.T) {
			k := "k-" + w.name
			key, _ := stateKey(s.prefix, s.slot, policyTag(p), k)
			take(t, s, p, k, 1) // expiry now+3.1s, recorded
			w.write(key, k)     // TAT now+300ms, expiry now+300ms
			if got := pttl(t, c, key); got > 300 {
				t.Fatalf("PTTL after the other writer = %d ms, want at most 300", got)
			}
			take(t, s, p, k, 1) // TAT now+400ms: the record is stale, so the expiry is set
			if got := pttl(t, c, key); got <= 3300 || got > 3400 {
				t.Fatalf("PTTL after a take that follows another writer = %d ms, want in (3300, 3400]", got)
			}
		})
	}
}
