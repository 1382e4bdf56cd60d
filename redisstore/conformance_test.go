// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"strconv"
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
// at now (the x field, or the end of a fixed window's field start:end): keys of a store on a caller-supplied clock stay in
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
				x := h["x"]
				for f := range h {
					if _, end, found := strings.Cut(f, ":"); found {
						x = end // a fixed window's field, start:end (there is one)
					}
				}
				if v, err := strconv.ParseInt(x, 10, 64); err != nil || v > now {
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

func conformance(t *testing.T, c rueidis.Client, opts ...Option) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		prefix := fmt.Sprintf("t%d:", harnessSeq.Add(1))
		s, err := New(c, append([]Option{WithClock(clock), WithPrefix(prefix), WithTimeout(10 * time.Second)}, opts...)...)
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
