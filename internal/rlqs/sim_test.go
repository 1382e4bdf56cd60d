// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"context"
	"log/slog"
	"math"
	"net"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/config"
)

// loadConfig compiles one YAML configuration file.
func loadConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	c, err := config.Load(fstest.MapFS{"rules.yaml": {Data: []byte(yaml)}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const apiRule = `
domain: edge
descriptors:
  - key: route
    value: api
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token-bucket}
  - key: route
    value: free
    rate_limit: {unlimited: true}
  - key: route
    value: banned
    rate_limit: {unit: second, requests_per_unit: 0}
`

// replica is one sluice serving RLQS on an in-memory listener.
type replica struct {
	svc *Service
	lis *bufconn.Listener
	g   *grpc.Server
	cc  *grpc.ClientConn
}

func startReplica(t testing.TB, cfg *config.Config, opts ...Option) *replica {
	t.Helper()
	svc, err := New(func() *config.Config { return cfg }, append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return startReplicaWith(t, svc)
}

func startReplicaWith(t testing.TB, svc *Service) *replica {
	t.Helper()
	var err error
	r := &replica{svc: svc, lis: bufconn.Listen(1 << 20), g: grpc.NewServer()}
	svc.Register(r.g)
	go r.g.Serve(r.lis)
	r.cc, err = grpc.NewClient("passthrough:///rlqs",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return r.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// stop stops the replica and waits (in a synctest bubble) for its ticker
// to see that no stream is left.
func (r *replica) stop() {
	r.cc.Close()
	r.g.Stop()
	time.Sleep(2 * r.svc.tick)
}

// envoy simulates one Envoy's rate_limit_quota filter for one bucket, as
// its source does it: the first request of a bucket is allowed and
// reported at once; reports every interval carry allowed and denied since
// the last and time_elapsed in whole seconds; a token-bucket assignment
// fills tokens_per_fill per whole second of fill_interval continuously into
// max_tokens, starts full when it differs from the one in force (max_tokens,
// tokens_per_fill and fill_interval's nanos compared, as Envoy does) and
// carries over when equal; the assignment expires after the whole seconds
// of its TTL (none: at once); with no assignment in force the request is
// allowed (Envoy's default no_assignment_behavior); an abandon_action
// erases the bucket, its assignment and its counts, and the next request
// makes it anew (allowed and reported at once).
type envoy struct {
	t      testing.TB
	bucket map[string]string
	demand float64       // requests per second offered
	every  time.Duration // reporting interval
	// report, when set, replaces the counts reported (a client that lies).
	report func(allowed, denied uint64) (uint64, uint64)

	mu       sync.Mutex
	kind     kind
	tb       *typev3.TokenBucket
	tokens   float64
	rate     float64
	filled   time.Time
	expires  time.Time
	issued   int  // assignments received that started a new bucket
	erased   bool // an abandon_action erased the bucket; the next request makes it
	lapses   int  // requests decided after an assignment expired
	allowed  uint64
	denied   uint64
	admitted []admit // cumulative admitted per step, for windows
}

type admit struct {
	at time.Time
	n  uint64
}

// run offers demand requests per second (evenly, 10 ms steps) over a new
// stream until stop, and closes the stream then.
func (e *envoy) run(cc *grpc.ClientConn, stop time.Time, done *sync.WaitGroup) {
	defer done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := rlqspb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
	if err != nil {
		e.t.Error(err)
		return
	}
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			resp, err := cl.Recv()
			if err != nil {
				return
			}
			for _, a := range resp.GetBucketAction() {
				e.apply(a)
			}
		}
	}()
	const step = 10 * time.Millisecond
	var (
		acc        float64
		created    bool
		lastReport time.Time
		total      uint64
	)
	start := time.Now()
	next := start.Add(e.every)
	for now := time.Now(); now.Before(stop); now = time.Now() {
		e.mu.Lock()
		if e.erased {
			e.erased, created = false, false
		}
		e.mu.Unlock()
		acc += e.demand * step.Seconds()
		for ; acc >= 1; acc-- {
			if !created {
				created = true
				lastReport = now
				total++
				e.send(cl, 1, 0, 0)
				continue
			}
			if e.decide(now) {
				total++
			}
		}
		e.mu.Lock()
		e.admitted = append(e.admitted, admit{now, total})
		e.mu.Unlock()
		if created && !now.Before(next) {
			e.mu.Lock()
			a, d := e.allowed, e.denied
			e.allowed, e.denied = 0, 0
			e.mu.Unlock()
			e.send(cl, a, d, now.Sub(lastReport))
			lastReport = now
			next = next.Add(e.every)
		}
		time.Sleep(step)
	}
	cl.CloseSend()
	cancel()
	<-recvDone
}

func (e *envoy) send(cl rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient, a, d uint64, elapsed time.Duration) {
	if e.report != nil {
		a, d = e.report(a, d)
	}
	err := cl.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId:           &rlqspb.BucketId{Bucket: e.bucket},
		TimeElapsed:        &durationpb.Duration{Seconds: int64(elapsed / time.Second)},
		NumRequestsAllowed: a,
		NumRequestsDenied:  d,
	}}})
	if err != nil {
		e.t.Error(err)
	}
}

// decide admits or refuses one request now.
func (e *envoy) decide(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ok := true
	if e.kind != none && !now.Before(e.expires) {
		e.lapses++
	}
	if now.Before(e.expires) {
		switch e.kind {
		case denyAll:
			ok = false
		case tokens:
			e.tokens = math.Min(float64(e.tb.GetMaxTokens()), e.tokens+e.rate*now.Sub(e.filled).Seconds())
			e.filled = now
			if ok = e.tokens >= 1; ok {
				e.tokens--
			}
		}
	}
	if ok {
		e.allowed++
	} else {
		e.denied++
	}
	return ok
}

func (e *envoy) apply(a *rlqspb.RateLimitQuotaResponse_BucketAction) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if a.GetAbandonAction() != nil {
		e.kind, e.tb, e.expires, e.erased = none, nil, time.Time{}, true
		e.allowed, e.denied = 0, 0
		return
	}
	q := a.GetQuotaAssignmentAction()
	if q == nil {
		return
	}
	live := now.Before(e.expires)
	e.expires = now.Add(time.Duration(q.GetAssignmentTimeToLive().GetSeconds()) * time.Second)
	s := q.GetRateLimitStrategy()
	if tb := s.GetTokenBucket(); tb != nil {
		same := live && e.kind == tokens && e.tb.GetMaxTokens() == tb.GetMaxTokens() &&
			e.tb.GetTokensPerFill().GetValue() == tb.GetTokensPerFill().GetValue() &&
			e.tb.GetFillInterval().GetNanos() == tb.GetFillInterval().GetNanos()
		if same {
			return
		}
		e.kind, e.tb, e.filled = tokens, tb, now
		e.tokens = float64(tb.GetMaxTokens())
		if sec := tb.GetFillInterval().GetSeconds(); sec > 0 {
			e.rate = float64(tb.GetTokensPerFill().GetValue()) / float64(sec)
		} else {
			e.rate = math.Inf(1)
		}
		e.issued++
		return
	}
	if s.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL {
		e.kind = denyAll
	} else {
		e.kind = allowAll
	}
}

// between is how many requests e admitted in [from, to).
func (e *envoy) between(from, to time.Time) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	at := func(t time.Time) uint64 {
		var n uint64
		for _, a := range e.admitted {
			if a.at.Before(t) {
				n = a.n
			}
		}
		return n
	}
	return at(to) - at(from)
}
