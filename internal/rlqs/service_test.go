// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
)

type client = rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient

func open(t *testing.T, r *replica) client {
	t.Helper()
	cl, err := rlqspb.NewRateLimitQuotaServiceClient(r.cc).StreamRateLimitQuotas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func usage(bucket map[string]string, allowed, denied uint64) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: bucket}, NumRequestsAllowed: allowed, NumRequestsDenied: denied}
}

func send(t *testing.T, cl client, domain string, us ...*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage) {
	t.Helper()
	if err := cl.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: us}); err != nil {
		t.Fatal(err)
	}
}

// strategy describes an action: "allow", "deny" or "tb:tokens/max/fill".
func strategy(a *rlqspb.RateLimitQuotaResponse_BucketAction) string {
	s := a.GetQuotaAssignmentAction().GetRateLimitStrategy()
	if tb := s.GetTokenBucket(); tb != nil {
		return "tb:" + itoa(int64(tb.GetTokensPerFill().GetValue())) + "/" + itoa(int64(tb.GetMaxTokens())) + "/" + tb.GetFillInterval().AsDuration().String()
	}
	if s.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL {
		return "deny"
	}
	return "allow"
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func recv(t *testing.T, cl client) []string {
	t.Helper()
	resp, err := cl.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range resp.GetBucketAction() {
		ttl := a.GetQuotaAssignmentAction().GetAssignmentTimeToLive()
		if ttl.GetSeconds() != int64(DefaultTTL/time.Second) || ttl.GetNanos() != 0 {
			t.Errorf("assignment TTL %v, want %v in whole seconds", ttl.AsDuration(), DefaultTTL)
		}
		out = append(out, strategy(a))
	}
	return out
}

// recvN receives responses until they hold n actions (a report's answer,
// or a tick's, may come in more than one: each division's round delivers
// its own when it ends), and returns their strategies in order.
func recvN(t *testing.T, cl client, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		out = append(out, recv(t, cl)...)
	}
	return out
}

// recvBuckets receives responses until they hold an action for each of n
// buckets (by their "route" entry), and returns the last strategy of each.
func recvBuckets(t *testing.T, cl client, n int) map[string]string {
	t.Helper()
	by := map[string]string{}
	for len(by) < n {
		resp, err := cl.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range resp.GetBucketAction() {
			by[a.GetBucketId().GetBucket()["route"]] = strategy(a)
		}
	}
	return by
}

const matchRules = `
domain: edge
descriptors:
  - key: path
    value: /v1/trips
    descriptors:
      - key: rider
        rate_limit: {unit: minute, requests_per_unit: 600}
  - key: rider
    descriptors:
      - key: path
        rate_limit: {unit: second, requests_per_unit: 7}
  - key: route
    value: free
    rate_limit: {unlimited: true}
  - key: route
    value: banned
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: route
    value: shadow
    rate_limit: {unit: second, requests_per_unit: 5}
    shadow_mode: true
`

// TestMatching: a bucket's entries are ordered as the first rule with the
// same keys orders them that matches; other rules' orders are tried next;
// unlimited and shadow-mode rules assign allow-all, requests_per_unit 0
// deny-all, and a bucket no rule matches allow-all, counted.
func TestMatching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, matchRules))
		cl := open(t, r)
		for _, c := range []struct {
			bucket map[string]string
			want   string
		}{
			// path then rider: the first rule, 600 a minute (fill 60s).
			{map[string]string{"rider": "r1", "path": "/v1/trips"}, "tb:600/3/1m0s"},
			// path /v2 matches no first-rule value: rider then path.
			{map[string]string{"rider": "r1", "path": "/v2"}, "tb:7/2/1s"},
			{map[string]string{"route": "free"}, "allow"},
			{map[string]string{"route": "banned"}, "deny"},
			{map[string]string{"route": "shadow"}, "allow"},
			{map[string]string{"route": "other"}, "allow"},
			{map[string]string{"nope": "x", "path": "/v1/trips"}, "allow"},
		} {
			send(t, cl, "edge", usage(c.bucket, 1, 0))
			if got := recv(t, cl); len(got) != 1 || got[0] != c.want {
				t.Errorf("bucket %v: assigned %v, want %s", c.bucket, got, c.want)
			}
		}
		if got := metricValue(t, r.svc, `sluice_rlqs_unmatched_buckets_total`, `domain="edge"`); got != 2 {
			t.Errorf("unmatched buckets counted %v, want 2", got)
		}
		cl.CloseSend()
		// A domain the configuration does not have is no label of its own.
		cl = open(t, r)
		send(t, cl, "made-up", usage(map[string]string{"route": "api"}, 1, 0))
		if got := recv(t, cl); len(got) != 1 || got[0] != "allow" {
			t.Errorf("unknown domain: %v, want allow", got)
		}
		if got := metricValue(t, r.svc, `sluice_rlqs_unmatched_buckets_total`, `domain=""`); got != 1 {
			t.Errorf("unmatched buckets of unknown domains counted %v, want 1", got)
		}
		cl.CloseSend()
		r.stop()
	})
}

// TestFillIsPeriodRoundedUp: a division's fill interval is its rule's
// period rounded up to whole seconds, so a rule slower than one a second
// whose period is not whole seconds (1 per 1.5 s) is granted a token per
// fill, not deny-all, and no assignment admits more than the rule's rate.
func TestFillIsPeriodRoundedUp(t *testing.T) {
	for _, c := range []struct {
		period string
		limit  int
		want   string
	}{
		{"1500ms", 1, "tb:1/1/2s"},
		{"2500ms", 10, "tb:12/1/3s"},
		{"500ms", 1, "tb:2/1/1s"},
		{"90s", 3, "tb:3/1/1m30s"},
	} {
		t.Run(c.period, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := startReplica(t, loadConfig(t, fmt.Sprintf(`
domain: edge
descriptors:
  - key: route
    value: slow
    rate_limit: {period: %s, requests_per_unit: %d, algorithm: token-bucket}
`, c.period, c.limit)))
				cl := open(t, r)
				send(t, cl, "edge", usage(map[string]string{"route": "slow"}, 1, 0))
				resp, err := cl.Recv()
				if err != nil {
					t.Fatal(err)
				}
				a := resp.GetBucketAction()[0]
				if got := strategy(a); got != c.want {
					t.Errorf("the only Envoy of a %d-per-%s rule is assigned %s, want %s", c.limit, c.period, got, c.want)
				}
				period, _ := time.ParseDuration(c.period)
				tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
				if tb == nil || tb.GetMaxTokens() == 0 {
					t.Errorf("%s: every request refused", strategy(a))
				} else if rate := float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().GetSeconds()); rate > float64(c.limit)/period.Seconds() {
					t.Errorf("%s admits %.3f/s, more than %d per %s", strategy(a), rate, c.limit, c.period)
				}
				cl.CloseSend()
				r.stop()
			})
		})
	}
}

// TestBadReports: a stream must name its domain first and keep it, and
// every bucket id needs an entry and keeps within MaxBucketIDEntries and
// MaxBucketIDBytes (a bucket id at both bounds is TestBucketIDAtItsBounds).
func TestBadReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, apiRule))
		for _, c := range []struct {
			name    string
			reports []*rlqspb.RateLimitQuotaUsageReports
			want    string
		}{
			{"no domain", []*rlqspb.RateLimitQuotaUsageReports{{}}, "domain: must be set"},
			{"domain changed", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "edge"}, {Domain: "other"}}, `domain "other": the stream's domain is "edge"`},
			{"empty bucket id", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{}}}}, "bucket_quota_usages[0].bucket_id: must have at least one entry"},
			{"bucket id too long", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
				usage(map[string]string{"route": "api"}, 1, 0), usage(map[string]string{"route": strings.Repeat("x", MaxBucketIDBytes-len("route")+1)}, 1, 0)}}},
				"bucket_quota_usages[1].bucket_id: 1025 bytes of keys and values, more than the 1024 a bucket id may have"},
			{"bucket id of too many entries", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
				usage(entries(MaxBucketIDEntries+1), 1, 0)}}},
				"bucket_quota_usages[0].bucket_id: 17 entries, more than the 16 a bucket id may have"},
		} {
			cl := open(t, r)
			for _, m := range c.reports {
				cl.Send(m)
			}
			_, err := cl.Recv()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want InvalidArgument with %q", c.name, err, c.want)
			}
		}
		r.stop()
	})
}

// entries is a bucket id of n entries.
func entries(n int) map[string]string {
	b := make(map[string]string, n)
	for i := range n {
		b[fmt.Sprintf("k%d", i)] = "v"
	}
	return b
}

// TestBucketIDAtItsBounds: a bucket id of MaxBucketIDEntries entries and
// one of MaxBucketIDBytes bytes are accepted, and the assignment echoes
// each whole.
func TestBucketIDAtItsBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, apiRule))
		for _, b := range []map[string]string{entries(MaxBucketIDEntries), {"route": strings.Repeat("x", MaxBucketIDBytes-len("route"))}} {
			cl := open(t, r)
			send(t, cl, "edge", usage(b, 1, 0))
			resp, err := cl.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if acts := resp.GetBucketAction(); len(acts) != 1 || !maps.Equal(acts[0].GetBucketId().GetBucket(), b) {
				t.Errorf("a bucket id of %d entries: %v, want one assignment echoing it", len(b), acts)
			}
			cl.CloseSend()
		}
		r.stop()
	})
}

// TestLimits: a replica serves at most its streams, a stream reports at
// most its buckets; beyond, RESOURCE_EXHAUSTED, counted.
func TestLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, apiRule), WithLimits(1, 2))
		cl := open(t, r)
		send(t, cl, "edge", usage(map[string]string{"route": "api"}, 1, 0), usage(map[string]string{"route": "free"}, 1, 0))
		recvN(t, cl, 2)
		synctest.Wait()
		cl2 := open(t, r)
		// The stream is refused on opening: its report's Send may see the
		// end first (io.EOF); Recv has the status either way.
		cl2.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{"route": "api"}, 1, 0)}})
		if _, err := cl2.Recv(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "1 streams open") {
			t.Errorf("second stream: %v, want RESOURCE_EXHAUSTED", err)
		}
		send(t, cl, "edge", usage(map[string]string{"route": "x"}, 1, 0))
		if _, err := cl.Recv(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "reports 2 buckets") {
			t.Errorf("third bucket: %v, want RESOURCE_EXHAUSTED", err)
		}
		if got := r.svc.stats.refused.Load(); got != 2 {
			t.Errorf("refused %d, want 2", got)
		}
		r.stop()
	})
}

// TestIdleBucketsAreAbandoned: Envoy never forgets a bucket on its own
// (only an abandon_action erases it) and reports every bucket it has in
// every report, so a bucket whose reports carry no requests for idleTTLs
// assignment TTLs is abandoned, as the RLQS AbandonAction doc has it ("If
// no requests are reported for a bucket, after some time the server
// considers the bucket inactive"): an Envoy whose DefaultMaxBuckets
// buckets were each used once, then idle for ten minutes, has every one
// abandoned, and its next new bucket is assigned instead of ending the
// stream with RESOURCE_EXHAUSTED (which a reconnect, resending every
// bucket, would meet again).
func TestIdleBucketsAreAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, `
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token-bucket}
`))
		cl := open(t, r)
		var (
			mu        sync.Mutex
			abandoned = map[string]bool{}
			assigned  = map[string]bool{}
			ended     error
		)
		go func() {
			for {
				resp, err := cl.Recv()
				mu.Lock()
				if err != nil {
					ended = err
					mu.Unlock()
					return
				}
				for _, a := range resp.GetBucketAction() {
					k := a.GetBucketId().GetBucket()["tenant"]
					if a.GetAbandonAction() != nil {
						abandoned[k] = true
					} else {
						assigned[k] = true
					}
				}
				mu.Unlock()
			}
		}()
		// report sends one usage report, as Envoy does, of every bucket it
		// still has (an abandoned one is erased), plus extra.
		report := func(first bool, n int, extra ...string) {
			mu.Lock()
			var us []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage
			for i := range n {
				k := fmt.Sprintf("t%d", i)
				if abandoned[k] {
					continue
				}
				var a uint64
				if first {
					a = 1
				}
				us = append(us, usage(map[string]string{"tenant": k}, a, 0))
			}
			for _, k := range extra {
				us = append(us, usage(map[string]string{"tenant": k}, 1, 0))
			}
			mu.Unlock()
			if len(us) > 0 {
				send(t, cl, "edge", us...)
			}
		}
		report(true, DefaultMaxBuckets)
		for range 120 { // ten minutes of idle reports, every 5 s
			time.Sleep(5 * time.Second)
			report(false, DefaultMaxBuckets)
		}
		time.Sleep(5 * time.Second)
		report(false, DefaultMaxBuckets, "new")
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		t.Logf("abandoned %d of %d idle buckets; stream: %v", len(abandoned), DefaultMaxBuckets, ended)
		if len(abandoned) != DefaultMaxBuckets {
			t.Errorf("abandoned %d of %d buckets idle for ten minutes", len(abandoned), DefaultMaxBuckets)
		}
		if ended != nil || !assigned["new"] {
			t.Errorf("after %d buckets idle for ten minutes, a new bucket ends the stream (%v): idle buckets are never abandoned", DefaultMaxBuckets, ended)
		}
		mu.Unlock()
		cl.CloseSend()
		r.stop()
	})
}

// TestSilentStreamReleasesItsShare: Envoy reports every bucket every 5 s,
// so a stream that stays open but stops reporting (a hung Envoy, or a peer
// gone without a FIN) stops claiming its share after silentTTLs assignment
// TTLs: its record lives out its TTL, A after its last claim, and then,
// not before (its Envoy's assignment expires with it), the stream still
// reporting (200/s offered, limit 100/s) is granted the whole limit, within
// two ticks. Before, each tick claimed again for the silent stream with the
// demand it last reported, and it held half the limit for good.
func TestSilentStreamReleasesItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, apiRule))
		bk := map[string]string{"route": "api"}
		t0 := time.Now()
		silent := open(t, r)
		send(t, silent, "edge", usage(bk, 1, 0))
		recv(t, silent)
		go func() { // drain its assignments, as a TCP buffer would
			for {
				if _, err := silent.Recv(); err != nil {
					return
				}
			}
		}()
		busy := open(t, r)
		var (
			mu     sync.Mutex
			last   string
			whole  time.Duration // when busy was first granted the whole limit
			halved bool          // busy held half the limit (the silent stream the other half)
		)
		go func() {
			for {
				resp, err := busy.Recv()
				if err != nil {
					return
				}
				mu.Lock()
				for _, a := range resp.GetBucketAction() {
					last = strategy(a)
					halved = halved || last == "tb:50/13/1s"
					if last == "tb:100/25/1s" && whole == 0 && halved {
						whole = time.Since(t0)
					}
				}
				mu.Unlock()
			}
		}()
		send(t, busy, "edge", usage(bk, 1, 0))
		for range 12 { // a minute of reports of 200/s offered
			time.Sleep(5 * time.Second)
			send(t, busy, "edge", usage(bk, 500, 500))
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		// The silent stream's last claim is the last tick before
		// silentTTLs·A after its report at t0; its record expires A later.
		from := silentTTLs*DefaultTTL + DefaultTTL - DefaultTick
		to := from + 2*DefaultTick
		t.Logf("the reporting stream was granted the whole limit %v after the other's only report; now %s", whole, last)
		switch {
		case !halved:
			t.Errorf("the reporting stream never held half the limit: the silent stream's share was not in force")
		case whole == 0 || last != "tb:100/25/1s":
			t.Errorf("the only stream still reporting holds %s a minute after the other's only report, want tb:100/25/1s", last)
		case whole < from:
			t.Errorf("the silent stream's share went to the other %v after its last report, before its record (and its Envoy's assignment) could expire at %v", whole, from)
		case whole > to:
			t.Errorf("the silent stream's share went to the other %v after its last report, want by %v", whole, to)
		}
		silent.CloseSend()
		busy.CloseSend()
		r.stop()
	})
}

// flaky is a board that fails while down is set.
type flaky struct {
	Board
	down atomic.Bool
}

var errDown = errors.New("store down")

func (f *flaky) Read(ctx context.Context, d string, now time.Time) ([]Entry, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Board.Read(ctx, d, now)
}

// TestFailureModes: while the store fails, the rule's failure_mode
// decides: open assigns allow-all, closed deny-all, local keeps the last
// share (TestFailLocalJoinGetsWhatIsNotInForce: and divides it among the
// streams that join); when the store answers again, division resumes.
func TestFailureModes(t *testing.T) {
	for _, c := range []struct{ mode, first, during string }{
		{"open", "tb:100/25/1s", "allow"},
		{"closed", "tb:100/25/1s", "deny"},
		{"local", "tb:100/25/1s", ""},
	} {
		t.Run(c.mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := loadConfig(t, strings.Replace(apiRule, "algorithm: token-bucket", "algorithm: token-bucket, failure_mode: "+c.mode, 1))
				b := &flaky{Board: NewMemoryBoard()}
				r := startReplica(t, cfg, WithBoard(b))
				cl := open(t, r)
				send(t, cl, "edge", usage(map[string]string{"route": "api"}, 1, 0))
				if got := recv(t, cl); len(got) != 1 || got[0] != c.first {
					t.Fatalf("first assignment %v, want %s", got, c.first)
				}
				b.down.Store(true)
				time.Sleep(DefaultTick)
				synctest.Wait()
				if c.during != "" {
					if got := recv(t, cl); len(got) != 1 || got[0] != c.during {
						t.Errorf("while the store fails: %v, want %s", got, c.during)
					}
				}
				// local: the last share is re-issued before its TTL runs out.
				time.Sleep(DefaultTTL / 2)
				synctest.Wait()
				if got := recv(t, cl); len(got) != 1 || got[0] != c.during && !(c.during == "" && got[0] == c.first) {
					t.Errorf("refreshed while the store fails: %v", got)
				}
				b.down.Store(false)
				time.Sleep(DefaultTick)
				synctest.Wait()
				if c.during != "" {
					if got := recv(t, cl); len(got) != 1 || got[0] != c.first {
						t.Errorf("after the store answers: %v, want %s", got, c.first)
					}
				}
				if r.svc.stats.storeErrors.Load() == 0 {
					t.Error("store errors not counted")
				}
				cl.CloseSend()
				r.stop()
			})
		})
	}
}

// TestFailLocalJoinGetsWhatIsNotInForce: under failure_mode local, a
// stream that joins while the store fails gets only what this replica's
// other streams' grants in force leave of what they held at its last claim
// (0 while they hold it all); the others are lowered at the next tick
// their hysteresis allows, in the same batch as the newcomer is raised, so
// the grants in force never sum past the limit (100/s).
func TestFailLocalJoinGetsWhatIsNotInForce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := loadConfig(t, strings.Replace(apiRule, "algorithm: token-bucket", "algorithm: token-bucket, failure_mode: local", 1))
		b := &flaky{Board: NewMemoryBoard()}
		r := startReplica(t, cfg, WithBoard(b))
		bk := map[string]string{"route": "api"}
		inForce := map[string]int64{}
		got := func(name string, cl client, want string) {
			t.Helper()
			g := recv(t, cl)
			if len(g) != 1 || g[0] != want {
				t.Fatalf("%s assigned %v, want %s", name, g, want)
			}
			// tokens_per_fill/max_tokens/fill: max_tokens 0 admits nothing.
			f := strings.Split(strings.TrimPrefix(g[0], "tb:"), "/")
			var v int64
			for _, c := range f[0] {
				v = v*10 + int64(c-'0')
			}
			if f[1] == "0" {
				v = 0
			}
			inForce[name] = v
			var sum int64
			for _, g := range inForce {
				sum += g
			}
			if sum > 100 {
				t.Errorf("after %s's assignment the grants in force %v sum to %d, past the limit 100", name, inForce, sum)
			}
		}
		a := open(t, r)
		send(t, a, "edge", usage(bk, 1, 0))
		got("A", a, "tb:100/25/1s")
		b.down.Store(true)
		// A's grant changed less than a tick ago: it keeps it, C gets none.
		c := open(t, r)
		send(t, c, "edge", usage(bk, 1, 0))
		got("C", c, "tb:1/0/1s")
		// The next tick lowers A and raises C in one batch.
		time.Sleep(DefaultTick)
		synctest.Wait()
		got("A", a, "tb:50/13/1s")
		got("C", c, "tb:50/13/1s")
		// D joins half a tick later: A and C keep theirs until the next tick.
		time.Sleep(DefaultTick / 2)
		d := open(t, r)
		send(t, d, "edge", usage(bk, 1, 0))
		got("D", d, "tb:1/0/1s")
		time.Sleep(DefaultTick / 2)
		synctest.Wait()
		got("A", a, "tb:34/9/1s")
		got("C", c, "tb:33/9/1s")
		got("D", d, "tb:33/9/1s")
		a.CloseSend()
		c.CloseSend()
		d.CloseSend()
		r.stop()
	})
}

// TestReloadChangesBudget: a reload that changes the rule's limit changes
// the division at the next tick.
func TestReloadChangesBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cur atomic.Pointer[config.Config]
		cur.Store(loadConfig(t, apiRule))
		svc, err := New(cur.Load)
		if err != nil {
			t.Fatal(err)
		}
		r := startReplicaWith(t, svc)
		cl := open(t, r)
		send(t, cl, "edge", usage(map[string]string{"route": "api"}, 1, 0))
		if got := recv(t, cl); got[0] != "tb:100/25/1s" {
			t.Fatalf("first assignment %v", got)
		}
		cur.Store(loadConfig(t, strings.Replace(apiRule, "requests_per_unit: 100", "requests_per_unit: 40", 1)))
		time.Sleep(DefaultTick)
		synctest.Wait()
		if got := recv(t, cl); got[0] != "tb:40/10/1s" {
			t.Errorf("after the reload %v, want tb:40/10/1s", got)
		}
		cl.CloseSend()
		r.stop()
	})
}

// TestReloadOfPeriodAloneReachesEnvoy: a reload that changes only a
// rule's period (4 per second to 4 per minute, the same tokens per fill)
// changes what Envoy enforces. The new fill is a change to assign, and
// since Envoy keeps its token bucket when max_tokens, tokens_per_fill and
// fill_interval's nanos are equal (the envoy simulator compares them as
// Envoy's protoTokenBucketsEq does), the new bucket follows a deny-all of
// its bucket in the same response. After the reload the fleet (one Envoy)
// keeps within rate·w + Excess of the new limit.
func TestReloadOfPeriodAloneReachesEnvoy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const before = `
domain: edge
descriptors:
  - key: route
    value: api
    rate_limit: {unit: second, requests_per_unit: 4, algorithm: token-bucket}
`
		var cur atomic.Pointer[config.Config]
		cur.Store(loadConfig(t, before))
		svc, err := New(cur.Load, WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		r := startReplicaWith(t, svc)
		e := &envoy{t: t, bucket: map[string]string{"route": "api"}, demand: 20, every: 5 * time.Second}
		var wg sync.WaitGroup
		wg.Add(1)
		t0 := time.Now()
		go e.run(r.cc, t0.Add(100*time.Second), &wg)
		time.Sleep(20 * time.Second)
		cur.Store(loadConfig(t, strings.Replace(before, "unit: second", "unit: minute", 1)))
		wg.Wait()
		from, to := t0.Add(30*time.Second), t0.Add(90*time.Second)
		w := to.Sub(from)
		rate := 4.0 / 60
		got := float64(e.between(from, to))
		bound := rate*w.Seconds() + Excess(rate, 1, 1, 0, w, DefaultTick, DefaultBurstWindow)
		t.Logf("admitted %.0f in %v after the reload to 4/min; bound %.1f; %d buckets started", got, w, bound, e.issued)
		if got > bound {
			t.Errorf("admitted %.0f in %v after a reload to 4 per minute, more than rate·w + Excess = %.1f: Envoy still enforces 4 per second", got, w, bound)
		}
		r.stop()
	})
}

// metricValue is the value of svc's metric name with the labels
// (`k="v",...` in name order), or -1.
func metricValue(t *testing.T, svc *Service, name, labels string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(svc); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+`="`+l.GetValue()+`"`)
			}
			if strings.Join(ls, ",") != labels {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// TestDrain: Drain ends open streams with UNAVAILABLE and refuses new
// ones, so a graceful shutdown does not wait for them.
func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, apiRule))
		cl := open(t, r)
		send(t, cl, "edge", usage(map[string]string{"route": "api"}, 1, 0))
		recv(t, cl)
		r.svc.Drain()
		if _, err := cl.Recv(); status.Code(err) != codes.Unavailable {
			t.Errorf("open stream after Drain: %v, want UNAVAILABLE", err)
		}
		cl2 := open(t, r)
		if _, err := cl2.Recv(); status.Code(err) != codes.Unavailable {
			t.Errorf("new stream after Drain: %v, want UNAVAILABLE", err)
		}
		r.stop()
	})
}

type wrapped struct{ sluice.Store }

func (w wrapped) Unwrap() sluice.Store { return w.Store }

// TestBoardFor: Redis shares divisions, through wrappers (tracing); memory
// does not.
func TestBoardFor(t *testing.T) {
	rs, err := redisstore.Open("redis://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if _, ok := BoardFor(wrapped{wrapped{rs}}).(redisBoard); !ok {
		t.Error("a wrapped Redis store: no Redis board")
	}
	ms := memstore.New()
	defer ms.Close()
	if b := BoardFor(wrapped{ms}); b != nil {
		t.Errorf("memstore: board %T, want none", b)
	}
}

// TestReloadMovesBuckets: a reload that makes a divided bucket unlimited
// assigns it allow-all at the next tick and frees its share; one that
// gives an unmatched bucket a rule divides it.
func TestReloadMovesBuckets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cur atomic.Pointer[config.Config]
		cur.Store(loadConfig(t, apiRule))
		svc, err := New(cur.Load)
		if err != nil {
			t.Fatal(err)
		}
		r := startReplicaWith(t, svc)
		cl := open(t, r)
		send(t, cl, "edge", usage(map[string]string{"route": "api"}, 1, 0), usage(map[string]string{"route": "new"}, 1, 0))
		if got := recvN(t, cl, 2); strings.Join(got, " ") != "allow tb:100/25/1s" {
			t.Errorf("first assignments %v", got)
		}
		swapped := strings.Replace(strings.Replace(apiRule, "value: api", "value: new", 1), "value: free", "value: api", 1)
		cur.Store(loadConfig(t, swapped))
		time.Sleep(DefaultTick)
		synctest.Wait()
		byBucket := recvBuckets(t, cl, 2)
		if byBucket["api"] != "allow" || byBucket["new"] != "tb:100/25/1s" {
			t.Errorf("after the reload: %v, want api allowed and new divided", byBucket)
		}
		if n := len(svc.divs); n != 1 {
			t.Errorf("%d divisions, want 1 (api's left)", n)
		}
		cl.CloseSend()
		r.stop()
	})
}

// TestDivisions: the snapshot shows each division with its streams.
func TestDivisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, apiRule), WithReplicaID("r"))
		a, b := open(t, r), open(t, r)
		send(t, a, "edge", usage(map[string]string{"route": "api"}, 1, 0))
		recv(t, a)
		send(t, b, "edge", usage(map[string]string{"route": "api"}, 1, 0))
		recv(t, b)
		synctest.Wait()
		ds := r.svc.Divisions(0)
		if len(ds) != 1 {
			t.Fatalf("%d divisions, want 1", len(ds))
		}
		d := ds[0]
		if d.Rule != "edge.route_api" || d.Bucket["route"] != "api" || d.Budget != 100 || d.Fill != time.Second || d.FleetGrant != 100 || d.Replicas != 1 || len(d.Streams) != 2 {
			t.Errorf("division %+v", d)
		}
		if d.Streams[0].Grant+d.Streams[1].Grant != 100 || d.Streams[0].Demand >= 0 {
			t.Errorf("streams %+v: want the limit split, demands unknown", d.Streams)
		}
		a.CloseSend()
		b.CloseSend()
		r.stop()
	})
}

// TestDivisionsPerRule: Divisions(n) keeps, of each rule's divisions, the
// n of greatest fleet demand (ties: by bucket key), sorted by rule and
// bucket key; Divisions(0) keeps them all.
func TestDivisionsPerRule(t *testing.T) {
	cfg := loadConfig(t, apiRule)
	svc, err := New(func() *config.Config { return cfg })
	if err != nil {
		t.Fatal(err)
	}
	rules := cfg.Rules()
	a, b := rules[0], rules[1]
	for _, d := range []struct {
		rule   *config.Rule
		bucket string
		demand float64
	}{{a, "1", 5}, {a, "2", 9}, {a, "3", 1}, {a, "4", 9}, {b, "5", 0}, {b, "6", 2}, {b, "7", 1}} {
		svc.divs[d.rule.Policy.Name+"\x00"+d.bucket] = &division{rule: d.rule, bucket: d.bucket, fleetDemand: d.demand, parts: map[*part]struct{}{}}
	}
	got := func(n int) string {
		var s []string
		for _, d := range svc.Divisions(n) {
			s = append(s, fmt.Sprintf("%s/%g", d.Rule, d.FleetDemand))
		}
		return strings.Join(s, " ")
	}
	ra, rb := a.FullKey, b.FullKey
	if ra > rb {
		t.Fatalf("rules %q, %q: the test wants them in order", ra, rb)
	}
	for _, c := range []struct {
		n    int
		want string
	}{
		{0, fmt.Sprintf("%[1]s/5 %[1]s/9 %[1]s/1 %[1]s/9 %[2]s/0 %[2]s/2 %[2]s/1", ra, rb)},
		{2, fmt.Sprintf("%[1]s/9 %[1]s/9 %[2]s/2 %[2]s/1", ra, rb)},
		{1, fmt.Sprintf("%[1]s/9 %[2]s/2", ra, rb)},
	} {
		if g := got(c.n); g != c.want {
			t.Errorf("Divisions(%d): %s, want %s", c.n, g, c.want)
		}
	}
}

// TestDivisionsShownStreams: Divisions(n > 0) lists at most ShownStreams
// streams of a division, those of greatest demand (unknown last), and
// counts the others in MoreStreams (every Envoy of a fleet may report one
// bucket: it listed them all on every poll); Divisions(0) lists them all.
func TestDivisionsShownStreams(t *testing.T) {
	cfg := loadConfig(t, apiRule)
	svc, err := New(func() *config.Config { return cfg })
	if err != nil {
		t.Fatal(err)
	}
	dv := &division{rule: cfg.Rules()[0], bucket: "b", parts: map[*part]struct{}{}}
	const n = ShownStreams + 8
	for i := range n {
		demand := float64(i)
		if i == n-1 {
			demand = Unknown
		}
		dv.parts[&part{st: &stream{id: fmt.Sprintf("s%03d", i)}, bucket: &rlqspb.BucketId{}, demand: demand}] = struct{}{}
	}
	svc.divs["x"] = dv
	shown := svc.Divisions(1)[0]
	if len(shown.Streams) != ShownStreams || shown.MoreStreams != n-ShownStreams {
		t.Fatalf("Divisions(1): %d streams listed, %d more; want %d and %d", len(shown.Streams), shown.MoreStreams, ShownStreams, n-ShownStreams)
	}
	for _, st := range shown.Streams {
		if st.Demand < float64(n-1-ShownStreams) {
			t.Errorf("stream %s of demand %g listed: want the %d of greatest demand", st.Stream, st.Demand, ShownStreams)
		}
	}
	if all := svc.Divisions(0)[0]; len(all.Streams) != n || all.MoreStreams != 0 {
		t.Errorf("Divisions(0): %d streams, %d more; want all %d", len(all.Streams), all.MoreStreams, n)
	}
}

// hanging is a store that does not answer (blackholed) the calls hang
// selects until release is closed or the caller gives up; pending is set
// while one such call is in progress.
type hanging struct {
	Board
	hang    func(op string) bool // "read", "drop"
	entered chan struct{}
	release chan struct{}
	pending atomic.Bool
}

func newHanging(hang func(op string) bool) *hanging {
	return &hanging{Board: NewMemoryBoard(), hang: hang, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *hanging) wait(ctx context.Context, op string) error {
	if !b.hang(op) {
		return nil
	}
	b.pending.Store(true)
	defer b.pending.Store(false)
	b.entered <- struct{}{}
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *hanging) Read(ctx context.Context, d string, now time.Time) ([]Entry, error) {
	if err := b.wait(ctx, "read"); err != nil {
		return nil, err
	}
	return b.Board.Read(ctx, d, now)
}

func (b *hanging) Drop(ctx context.Context, d, stream string, before time.Time) error {
	if err := b.wait(ctx, "drop"); err != nil {
		return err
	}
	return b.Board.Drop(ctx, d, stream, before)
}

// TestBlackholedStoreDoesNotFreezeOtherStreams: board calls never hold the
// service's mutex, so a store that does not answer holds up only the
// stream whose call it is. Another Envoy's first report (of an allow-all
// bucket, which needs no store call) is answered while the store has not
// yet answered a closing stream's Drop of its records, or a stream's first
// report's division (its Read). Not in a synctest bubble: a goroutine
// waiting for a mutex would stop its clock.
func TestBlackholedStoreDoesNotFreezeOtherStreams(t *testing.T) {
	for _, op := range []string{"drop", "read"} {
		t.Run(op, func(t *testing.T) {
			var armed atomic.Bool
			hb := newHanging(func(o string) bool { return o == op && armed.Load() })
			// A long tick: the first report's division gives up on the
			// store only after a minute.
			r := startReplica(t, loadConfig(t, apiRule), WithBoard(hb), WithTick(time.Minute))
			defer func() { r.cc.Close(); r.g.Stop() }()
			// Whatever the outcome, the store answers after ten seconds.
			defer time.AfterFunc(10*time.Second, func() { close(hb.release) }).Stop()
			first := open(t, r)
			if op == "drop" {
				send(t, first, "edge", usage(map[string]string{"route": "api"}, 1, 0))
				recv(t, first)
				armed.Store(true)
				first.CloseSend()
			} else {
				armed.Store(true)
				send(t, first, "edge", usage(map[string]string{"route": "api"}, 1, 0))
			}
			<-hb.entered // the store does not answer the first stream's call
			other := open(t, r)
			send(t, other, "edge", usage(map[string]string{"route": "free"}, 1, 0))
			got := recv(t, other)
			if !hb.pending.Load() {
				t.Errorf("another Envoy's first report (%v) was answered only once the store's %s had ended: a store that does not answer froze the replica's streams", got, op)
			}
			other.CloseSend()
			first.CloseSend()
		})
	}
}

// TestStuckEnvoyDoesNotStallOthers: a Send blocks once the stream's
// flow-control window and gRPC's write quota are full, so an Envoy that
// stops reading (hung, or its socket no longer drained) must hold up only
// its own stream's sender: a healthy Envoy on the same replica keeps
// getting its assignments re-issued before their TTL runs out (the package
// doc: they "are re-sent unchanged when half of A has passed") for the
// minute the stuck one, with 1000 buckets re-issued every TTL/2, does not
// read.
func TestStuckEnvoyDoesNotStallOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, apiRule))
		// The stuck Envoy: 1000 unmatched buckets with long ids, their
		// allow-all assignments re-issued every TTL/2; it never reads.
		stuck := open(t, r)
		us := make([]*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, DefaultMaxBuckets)
		for i := range us {
			us[i] = usage(map[string]string{"tenant": fmt.Sprintf("%0200d", i)}, 1, 0)
		}
		send(t, stuck, "edge", us...)
		// A healthy Envoy on the same replica.
		good := open(t, r)
		var (
			mu      sync.Mutex
			last    = time.Now()
			longest time.Duration
		)
		go func() {
			for {
				if _, err := good.Recv(); err != nil {
					return
				}
				mu.Lock()
				longest = max(longest, time.Since(last))
				last = time.Now()
				mu.Unlock()
			}
		}()
		send(t, good, "edge", usage(map[string]string{"route": "api"}, 1, 0))
		for range 12 { // a minute of reports
			time.Sleep(5 * time.Second)
			send(t, good, "edge", usage(map[string]string{"route": "api"}, 50, 0))
		}
		synctest.Wait()
		mu.Lock()
		longest = max(longest, time.Since(last))
		mu.Unlock()
		t.Logf("longest gap between the healthy Envoy's assignments: %v", longest)
		if longest >= DefaultTTL {
			t.Errorf("the healthy Envoy went %v without an assignment (TTL %v): its assignment expired while another Envoy did not read", longest, DefaultTTL)
		}
		// What waits for the stuck Envoy is the latest action of each of
		// its buckets, not a minute of re-issues.
		r.svc.mu.Lock()
		for st := range r.svc.streams {
			st.out.mu.Lock()
			if n := len(st.out.acts); n > DefaultMaxBuckets {
				t.Errorf("stream %s: %d actions wait to be sent for its %d buckets", st.id, n, DefaultMaxBuckets)
			}
			st.out.mu.Unlock()
		}
		r.svc.mu.Unlock()
		good.CloseSend()
		stuck.CloseSend()
		r.stop()
	})
}

// slowBoard answers every call after lat, like a store one round trip
// away, and gives up when the caller's context ends first.
type slowBoard struct {
	Board
	lat *atomic.Int64 // nanoseconds
}

func (b slowBoard) wait(ctx context.Context) error {
	select {
	case <-time.After(time.Duration(b.lat.Load())):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b slowBoard) Read(ctx context.Context, d string, now time.Time) ([]Entry, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return b.Board.Read(ctx, d, now)
}

func (b slowBoard) Claim(ctx context.Context, d string, budget int64, now time.Time, ttl time.Duration, cs []Claim) ([]int64, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return b.Board.Claim(ctx, d, budget, now, ttl, cs)
}

// TestHealthyStoreIsNotAFailure: each division's round has its own
// deadline and rounds run side by side, so a store that answers every call
// in 1 ms (a Redis a network hop away) divides all of one Envoy's 600
// buckets (DefaultMaxBuckets allows 1000) at its first report and at every
// tick: no store error is counted and the failure mode (open: ALLOW_ALL)
// never decides. The package doc promises the failure mode only "when the
// store fails".
func TestHealthyStoreIsNotAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := loadConfig(t, `
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token-bucket, failure_mode: open}
`)
		var lat atomic.Int64
		lat.Store(int64(time.Millisecond))
		r := startReplica(t, cfg, WithBoard(slowBoard{NewMemoryBoard(), &lat}))
		cl := open(t, r)
		var allowAlls atomic.Int64
		go func() {
			for {
				resp, err := cl.Recv()
				if err != nil {
					return
				}
				for _, a := range resp.GetBucketAction() {
					if strategy(a) == "allow" {
						allowAlls.Add(1)
					}
				}
			}
		}()
		const n = 600
		us := make([]*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, n)
		for i := range us {
			us[i] = usage(map[string]string{"tenant": fmt.Sprintf("t%d", i)}, 1, 0)
		}
		send(t, cl, "edge", us...)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		errs := r.svc.stats.storeErrors.Load()
		t.Logf("store errors %d, allow-all assignments %d", errs, allowAlls.Load())
		if errs != 0 || allowAlls.Load() != 0 {
			t.Errorf("a store answering every call in 1 ms: %d store errors and %d ALLOW_ALL assignments (failure_mode open) for %d buckets", errs, allowAlls.Load(), n)
		}
		cl.CloseSend()
		r.stop()
	})
}
