// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

var harnessSeq atomic.Int64

// newClient connects to addrs and closes the client when t ends.
func newClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		t.Fatalf("connecting to %v: %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// liveKeys counts the state hashes under prefix whose state has not expired
// at now (stateExpiry): keys of a store on a caller-supplied clock stay in
// Redis for the expiry slack after that.
func liveKeys(t testing.TB, c rueidis.Client, prefix string, now int64) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for _, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatalf("SCAN: %v", err)
			}
			for _, k := range e.Elements {
				if strings.HasSuffix(k, "l") {
					continue // a sliding-log list; its hash is counted
				}
				h, err := c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
				if err != nil {
					t.Fatalf("HGETALL %s: %v", k, err)
				}
				if stateExpiry(t, k, h).Cmp(big.NewInt(now)) > 0 {
					n++
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return n
}

// stateExpiry returns when the state in hash h (of key k) becomes idle, in
// ns: a fixed window's end (its field start:end); a bucket's TAT, rounded
// up to a whole ns (its field B:d:H holds (TAT - B ms) × d); else the x field.
func stateExpiry(t testing.TB, k string, h map[string]string) *big.Int {
	t.Helper()
	x, ok := new(big.Int).SetString(h["x"], 10)
	for f, v := range h {
		a, b, found := strings.Cut(f, ":")
		if !found {
			continue
		}
		if strings.Contains(k, ":fixed-window.2") {
			x, ok = new(big.Int).SetString(b, 10)
			break
		}
		ds, _, _ := strings.Cut(b, ":") // B:d:H
		epoch, ok1 := new(big.Int).SetString(a, 10)
		den, ok2 := new(big.Int).SetString(ds, 10)
		val, ok3 := new(big.Int).SetString(v, 10)
		if !ok1 || !ok2 || !ok3 || den.Sign() <= 0 {
			t.Fatalf("%s: field %s = %s: not a bucket's B:d:H", k, f, v)
		}
		// ceil(B×10⁶ + v/d)
		q, r := new(big.Int).QuoRem(val, den, new(big.Int))
		x = q.Add(q, epoch.Mul(epoch, big.NewInt(1_000_000)))
		if r.Sign() > 0 {
			x.Add(x, big.NewInt(1))
		}
		ok = true
	}
	if !ok {
		t.Fatalf("%s: %v: no state expiry", k, h)
	}
	return x
}

func conformance(t *testing.T, c rueidis.Client, opts ...Option) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		prefix := fmt.Sprintf("t%d:", harnessSeq.Add(1))
		s, err := New(c, append([]Option{WithClock(clock), WithPrefix(prefix)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Harness{
			Store: s,
			Clock: clock,
			Len:   func() int { return liveKeys(t, c, prefix, clock.Now().UnixNano()) },
		}
	})
}

func TestConformanceStandalone(t *testing.T) {
	t.Parallel()
	conformance(t, newClient(t, sluicetest.StartRedis(t)))
}
