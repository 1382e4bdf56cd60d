// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"context"
	"errors"
	"strings"
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

// TestBadReports: a stream must name its domain first and keep it, and
// every bucket id needs an entry.
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

// TestLimits: a replica serves at most its streams, a stream reports at
// most its buckets; beyond, RESOURCE_EXHAUSTED, counted.
func TestLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, apiRule), WithLimits(1, 2))
		cl := open(t, r)
		send(t, cl, "edge", usage(map[string]string{"route": "api"}, 1, 0), usage(map[string]string{"route": "free"}, 1, 0))
		recv(t, cl)
		synctest.Wait()
		cl2 := open(t, r)
		send(t, cl2, "edge", usage(map[string]string{"route": "api"}, 1, 0))
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
		if got := recv(t, cl); strings.Join(got, " ") != "allow tb:100/25/1s" {
			t.Errorf("first assignments %v", got)
		}
		swapped := strings.Replace(strings.Replace(apiRule, "value: api", "value: new", 1), "value: free", "value: api", 1)
		cur.Store(loadConfig(t, swapped))
		time.Sleep(DefaultTick)
		synctest.Wait()
		resp, err := cl.Recv()
		if err != nil {
			t.Fatal(err)
		}
		byBucket := map[string]string{}
		for _, a := range resp.GetBucketAction() {
			byBucket[a.GetBucketId().GetBucket()["route"]] = strategy(a)
		}
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
		ds := r.svc.Divisions()
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
