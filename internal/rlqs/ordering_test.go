// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// gatedBoard is a Board whose Drops wait, while the gate is set, until it
// is opened (or their context ends): a Drop that is slow to land, as the
// goroutine tickOnce starts for it may be.
type gatedBoard struct {
	Board
	mu      sync.Mutex
	gate    chan struct{}
	waiting int // Drops waiting at the gate
}

func (b *gatedBoard) Drop(ctx context.Context, division, stream string, before time.Time) error {
	b.mu.Lock()
	g := b.gate
	if g != nil {
		b.waiting++
	}
	b.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.Board.Drop(ctx, division, stream, before)
}

// TestAbandonDropKeepsNewRecord: a bucket abandoned at a tick has its
// record dropped by a goroutine of its own; when the stream reports the
// bucket again before that Drop lands, the new part's claim writes the
// stream's record, and the late Drop must not erase it (it did: the stream
// held a grant the board no longer showed, another replica claimed it
// again, and the grants in force summed past the budget L). A Drop removes
// only a record that expires by the leave's time plus the TTL.
func TestAbandonDropKeepsNewRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := loadConfig(t, apiRule) // route=api: 100/s, F = 1 s, L = 100
		shared := NewMemoryBoard()
		gb := &gatedBoard{Board: shared, gate: make(chan struct{})}
		r1 := startReplica(t, cfg, WithBoard(gb), WithReplicaID("r1"))
		r2 := startReplica(t, cfg, WithBoard(shared), WithReplicaID("r2"))
		bk := map[string]string{"route": "api"}

		var mu sync.Mutex
		grant := map[string]int64{} // the grant of the last token bucket, by client
		abandoned := false
		read := func(name string, cl client) {
			for {
				resp, err := cl.Recv()
				if err != nil {
					return
				}
				mu.Lock()
				for _, a := range resp.GetBucketAction() {
					if a.GetAbandonAction() != nil {
						abandoned = true
						delete(grant, name)
						continue
					}
					if tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket(); tb != nil {
						grant[name] = int64(tb.GetTokensPerFill().GetValue())
						if tb.GetMaxTokens() == 0 {
							grant[name] = 0 // a grant of 0: refuse
						}
					} else {
						delete(grant, name)
					}
				}
				mu.Unlock()
			}
		}
		a := open(t, r1)
		go read("a", a)
		send(t, a, "edge", usage(bk, 1, 0))
		// Reports with no requests, every 5 s, as Envoy sends them: the
		// bucket is idle from t = 0 and is abandoned at the tick at 6·A.
		for range 11 {
			time.Sleep(5 * time.Second)
			send(t, a, "edge", usage(bk, 0, 0))
		}
		time.Sleep(idleTTLs*DefaultTTL - 55*time.Second + DefaultTick/2)
		synctest.Wait()
		mu.Lock()
		gb.mu.Lock()
		waiting := gb.waiting
		gb.mu.Unlock()
		if !abandoned || waiting != 1 {
			mu.Unlock()
			t.Fatalf("setup: abandoned %v, drops waiting %d; want the bucket abandoned and its Drop waiting", abandoned, waiting)
		}
		mu.Unlock()

		// Envoy's next request makes the bucket anew: reported at once.
		send(t, a, "edge", usage(bk, 1, 0))
		synctest.Wait()
		close(gb.gate) // the abandon's Drop lands, within its timeout
		synctest.Wait()

		// Another replica's stream reports the bucket first.
		b := open(t, r2)
		go read("b", b)
		send(t, b, "edge", usage(bk, 1, 0))
		synctest.Wait()

		mu.Lock()
		ga, gbr := grant["a"], grant["b"]
		mu.Unlock()
		t.Logf("grants in force: stream a %d (its record dropped after its claim), stream b %d; budget 100", ga, gbr)
		if ga+gbr > 100 {
			t.Errorf("grants in force sum to %d, past the budget L = 100: the abandon's late Drop erased the re-made bucket's record", ga+gbr)
		}
		a.CloseSend()
		b.CloseSend()
		r1.stop()
		r2.stop()
	})
}

// hangingBoard is a Board whose Reads of divisions containing slow wait,
// while stall is set, until their context ends: a store that does not
// answer one division.
type hangingBoard struct {
	Board
	slow  string
	mu    sync.Mutex
	stall bool
}

func (b *hangingBoard) Read(ctx context.Context, division string, now time.Time) ([]Entry, error) {
	b.mu.Lock()
	stall := b.stall && strings.Contains(division, b.slow)
	b.mu.Unlock()
	if stall {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return b.Board.Read(ctx, division, now)
}

// TestTickDeliversInDecisionOrder: a tick's round of a division delivers
// its assignments when it ends, not once every division's round has
// (another's store call may hang for a tick). A stream joining the first
// division meanwhile has its report's round lower the other stream's
// grant; the tick's refresh, decided before, must not replace the lowered
// grant in the Envoy (it did: the Envoys held grants past the budget L
// until the next re-issue).
func TestTickDeliversInDecisionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := loadConfig(t, `
domain: edge
descriptors:
  - key: route
    value: api
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token-bucket}
  - key: route
    value: slow
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token-bucket}
`)
		sb := &hangingBoard{Board: NewMemoryBoard(), slow: "route_slow"}
		r := startReplica(t, cfg, WithBoard(sb))
		api := map[string]string{"route": "api"}
		slow := map[string]string{"route": "slow"}

		var mu sync.Mutex
		grant := map[string]int64{} // the grant of the last api assignment, by client
		read := func(name string, cl client) {
			for {
				resp, err := cl.Recv()
				if err != nil {
					return
				}
				mu.Lock()
				for _, a := range resp.GetBucketAction() {
					if a.GetBucketId().GetBucket()["route"] != "api" {
						continue
					}
					if tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket(); tb != nil {
						grant[name] = int64(tb.GetTokensPerFill().GetValue())
						if tb.GetMaxTokens() == 0 {
							grant[name] = 0
						}
					} else {
						delete(grant, name)
					}
				}
				mu.Unlock()
			}
		}
		t0 := time.Now()
		a := open(t, r)
		go read("a", a)
		send(t, a, "edge", usage(api, 1, 0))
		s := open(t, r)
		go read("s", s)
		send(t, s, "edge", usage(slow, 1, 0))
		synctest.Wait()

		// From 4.5 s the store hangs on the slow division: the tick at
		// 5 s (which refreshes a's assignment, issued at 0, half a TTL
		// ago) delivers at 6 s, when that division's round times out.
		time.Sleep(4500 * time.Millisecond)
		sb.mu.Lock()
		sb.stall = true
		sb.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()

		// At 5.5 s a second Envoy reports api for the first time.
		b := open(t, r)
		go read("b", b)
		send(t, b, "edge", usage(api, 1, 0))
		synctest.Wait()
		mu.Lock()
		t.Logf("%v: a holds %d, b %d", time.Since(t0), grant["a"], grant["b"])
		mu.Unlock()

		time.Sleep(700 * time.Millisecond) // past 6 s: the tick at 5 s delivers
		synctest.Wait()
		mu.Lock()
		ga, gb := grant["a"], grant["b"]
		mu.Unlock()
		t.Logf("%v: a holds %d, b %d; budget 100", time.Since(t0), ga, gb)
		if ga+gb > 100 {
			t.Errorf("the Envoys hold grants summing to %d, past the budget L = 100: the tick's stale refresh of a replaced the lower grant a's report round sent", ga+gb)
		}
		sb.mu.Lock()
		sb.stall = false
		sb.mu.Unlock()
		a.CloseSend()
		b.CloseSend()
		s.CloseSend()
		r.stop()
	})
}

// TestReportCrossingAbandonIgnored: a report that names a bucket with no
// requests, sent before its Envoy had the bucket's abandon (the two cross),
// does not make the bucket anew: the Envoy has forgotten it, and a part
// made from it would claim a share of unknown demand (as much as it can
// get) for four TTLs, starving the bucket's other Envoys. The bucket's next
// request (a report with requests) makes it anew.
func TestReportCrossingAbandonIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, `
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token-bucket}
`))
		cl := open(t, r)
		var (
			mu      sync.Mutex
			actions []string
		)
		go func() {
			for {
				resp, err := cl.Recv()
				if err != nil {
					return
				}
				mu.Lock()
				for _, a := range resp.GetBucketAction() {
					if a.GetAbandonAction() != nil {
						actions = append(actions, "abandon")
					} else {
						actions = append(actions, strategy(a))
					}
				}
				mu.Unlock()
			}
		}()
		last := func() string {
			mu.Lock()
			defer mu.Unlock()
			if len(actions) == 0 {
				return ""
			}
			return actions[len(actions)-1]
		}
		b := map[string]string{"tenant": "acme"}
		send(t, cl, "edge", usage(b, 1, 0))
		// Tick by tick until the abandon comes (idleTTLs TTLs idle).
		for i := 0; last() != "abandon"; i++ {
			if i > int((idleTTLs+1)*DefaultTTL/DefaultTick) {
				t.Fatalf("no abandon after %d idle TTLs: last action %q", idleTTLs+1, last())
			}
			time.Sleep(DefaultTick)
			synctest.Wait()
		}
		send(t, cl, "edge", usage(b, 0, 0)) // sent before the abandon arrived
		synctest.Wait()
		time.Sleep(2 * DefaultTick)
		synctest.Wait()
		r.svc.mu.Lock()
		parts := 0
		for st := range r.svc.streams {
			parts += len(st.parts)
		}
		r.svc.mu.Unlock()
		if got := last(); got != "abandon" || parts != 0 {
			t.Fatalf("a report of no requests crossing the abandon: last action %q, %d parts; want none made", got, parts)
		}
		send(t, cl, "edge", usage(b, 1, 0)) // the bucket's next request
		synctest.Wait()
		if got := last(); !strings.HasPrefix(got, "tb:") {
			t.Fatalf("a report with a request after the abandon: last action %q, want a token bucket", got)
		}
		cl.CloseSend()
		r.stop()
	})
}
