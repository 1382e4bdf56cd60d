// SPDX-License-Identifier: Apache-2.0

package grpclimit

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

const check = "/grpc.health.v1.Health/Check"

func newStore(t *testing.T) (*memstore.Store, *sluicetest.Clock) {
	t.Helper()
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	t.Cleanup(func() { store.Close() })
	return store, clock
}

func newLimiter(t *testing.T, store sluice.Store, p sluice.Policy, opts ...sluice.Option) *sluice.Limiter {
	t.Helper()
	l, err := sluice.NewLimiter(store, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// serve starts a gRPC server with the health service behind i's
// interceptors, on bufconn (loopback false) or 127.0.0.1, and returns a
// health client.
func serve(t *testing.T, i *Interceptor, loopback bool) healthpb.HealthClient {
	t.Helper()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(i.Unary()), grpc.ChainStreamInterceptor(i.Stream()))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	var lis net.Listener
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	target := "passthrough:///bufnet"
	if loopback {
		var err error
		if lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		target = lis.Addr().String()
	} else {
		bl := bufconn.Listen(1 << 20)
		lis = bl
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return bl.DialContext(ctx) }))
	}
	go srv.Serve(lis)
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return healthpb.NewHealthClient(conn)
}

func withKey(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
}

// retryInfo returns the RetryInfo and QuotaFailure of a status error.
func details(t *testing.T, err error) (*errdetails.RetryInfo, *errdetails.QuotaFailure) {
	t.Helper()
	var ri *errdetails.RetryInfo
	var qf *errdetails.QuotaFailure
	for _, d := range status.Convert(err).Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			ri = d
		case *errdetails.QuotaFailure:
			qf = d
		}
	}
	return ri, qf
}

func TestUnaryMetadataKey(t *testing.T) {
	store, clock := newStore(t)
	perKey := newLimiter(t, store, sluice.Policy{Name: "per-key", Algorithm: sluice.GCRA, Limit: 2, Period: time.Minute})
	i, err := New(Method(check, 1, Limit{Limiter: perKey, Key: Metadata("X-API-Key")}))
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, i, false)
	for n := range 2 {
		if _, err := c.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", n, err)
		}
	}
	_, err = c.Check(withKey("k1"), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third call: %v; want ResourceExhausted", err)
	}
	ri, qf := details(t, err)
	if ri == nil || ri.RetryDelay.AsDuration() != 30*time.Second {
		t.Errorf("RetryInfo %v; want 30s", ri)
	}
	if qf == nil || len(qf.Violations) != 1 || qf.Violations[0].Subject != "policy:per-key" {
		t.Errorf("QuotaFailure %v", qf)
	}
	// Another key, and a call without one, are not limited by per-key.
	if _, err := c.Check(withKey("k2"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("k2: %v", err)
	}
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("no key: %v", err)
	}
	clock.Advance(ri.RetryDelay.AsDuration())
	if _, err := c.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("after RetryInfo's delay: %v", err)
	}
	if st := i.Stats(); st.Refused != 1 || st.Admitted != 5 {
		t.Errorf("stats %+v", st)
	}
}

func TestStreamRefusedOnOpen(t *testing.T) {
	store, _ := newStore(t)
	perKey := newLimiter(t, store, sluice.Policy{Name: "streams", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute})
	i, err := New(Method("/grpc.health.v1.Health/", 1, Limit{Limiter: perKey, Key: Metadata("x-api-key")}))
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, i, false)
	ctx, cancel := context.WithCancel(withKey("k1"))
	defer cancel()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	s2, err := c.Watch(withKey("k1"), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s2.Recv()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: %v; want ResourceExhausted", err)
	}
	if ri, _ := details(t, err); ri == nil || ri.RetryDelay.AsDuration() != time.Minute {
		t.Errorf("RetryInfo %v; want 1m", ri)
	}
	// The service prefix covers Check too.
	if _, err := c.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Check under the service's limit: %v", err)
	}
}

func TestPeerIP(t *testing.T) {
	store, _ := newStore(t)
	perIP := newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.GCRA, Limit: 1, Period: time.Hour})
	i, err := New(Global(Limit{Limiter: perIP, Key: PeerIP(nil)}))
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, i, true)
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	// A forged x-forwarded-for does not help: the peer is not trusted.
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", "203.0.113.9")
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second call from 127.0.0.1: %v; want ResourceExhausted", err)
	}
	if d, _ := perIP.AllowN(context.Background(), "127.0.0.1", 0); d.Remaining != 0 {
		t.Errorf("127.0.0.1 has %d left; want its quota used", d.Remaining)
	}

	// Behind a trusted proxy (here: loopback), the forwarded address is the key.
	ip, err := clientip.New(clientip.TrustProxies(clientip.XForwardedFor, "127.0.0.0/8"))
	if err != nil {
		t.Fatal(err)
	}
	store2, _ := newStore(t)
	perIP2 := newLimiter(t, store2, sluice.Policy{Name: "per-ip", Algorithm: sluice.GCRA, Limit: 1, Period: time.Hour})
	i2, _ := New(Global(Limit{Limiter: perIP2, Key: PeerIP(ip)}))
	c2 := serve(t, i2, true)
	for _, addr := range []string{"203.0.113.1", "203.0.113.2"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", addr)
		if _, err := c2.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("client %s: %v", addr, err)
		}
	}
}

// An in-memory peer has no IP address: by default its calls share one key
// (limited together, defect 9); with MissingSkipped the limit does not
// apply to them; with MissingRefused they fail with InvalidArgument.
func TestUnaryBufconnPeerIsNoKey(t *testing.T) {
	for _, c := range []struct {
		missing Missing
		codes   []codes.Code
	}{
		{MissingShared, []codes.Code{codes.OK, codes.ResourceExhausted, codes.ResourceExhausted}},
		{MissingSkipped, []codes.Code{codes.OK, codes.OK, codes.OK}},
		{MissingRefused, []codes.Code{codes.InvalidArgument, codes.InvalidArgument, codes.InvalidArgument}},
	} {
		store, _ := newStore(t)
		perIP := newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.GCRA, Limit: 1, Period: time.Hour})
		i, _ := New(Global(Limit{Limiter: perIP, Key: PeerIP(nil), Missing: c.missing}))
		cl := serve(t, i, false)
		for n, want := range c.codes {
			if _, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != want {
				t.Errorf("Missing %d: in-memory peer, call %d: %v; want %v", c.missing, n, err, want)
			}
		}
	}
}

func TestShadowAndFailure(t *testing.T) {
	store, _ := newStore(t)
	enf := newLimiter(t, store, sluice.Policy{Name: "enforced", Algorithm: sluice.GCRA, Limit: 10, Period: time.Minute})
	sh := newLimiter(t, store, sluice.Policy{Name: "candidate", Algorithm: sluice.GCRA, Limit: 1, Period: time.Minute})
	var mu sync.Mutex
	var seen []ShadowRefusal
	i, err := New(
		Global(Limit{Limiter: enf, Key: Metadata("x-api-key")}, Limit{Limiter: sh, Key: Metadata("x-api-key"), Shadow: true}),
		OnShadowRefusal(func(_ context.Context, s ShadowRefusal) { mu.Lock(); seen = append(seen, s); mu.Unlock() }),
	)
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, i, false)
	for n := range 3 {
		if _, err := c.Check(withKey("k"), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v (shadow limits never refuse)", n, err)
		}
	}
	if len(seen) != 2 || seen[0].FullMethod != check || seen[0].Policy.Name != "candidate" {
		t.Errorf("shadow refusals %+v", seen)
	}

	for _, mode := range []sluice.FailureMode{sluice.FailOpen, sluice.FailClosed} {
		store, _ := newStore(t)
		o := &outage{Store: store}
		l := newLimiter(t, o, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Minute}, sluice.WithFailureMode(mode))
		var errs int
		i, _ := New(Global(Limit{Limiter: l, Key: Metadata("x-api-key")}), WithUnavailableRetryAfter(3*time.Second),
			OnError(func(context.Context, string, error) { errs++ }))
		c := serve(t, i, false)
		o.down.Store(true)
		_, err := c.Check(withKey("k"), &healthpb.HealthCheckRequest{})
		switch mode {
		case sluice.FailOpen:
			if err != nil {
				t.Errorf("fail open: %v", err)
			}
		case sluice.FailClosed:
			ri, _ := details(t, err)
			if status.Code(err) != codes.Unavailable || ri == nil || ri.RetryDelay.AsDuration() != 3*time.Second {
				t.Errorf("fail closed: %v, %v; want Unavailable with RetryInfo 3s", err, ri)
			}
		}
		if errs != 1 {
			t.Errorf("%v: OnError called %d times", mode, errs)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	store, _ := newStore(t)
	l := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "a", Algorithm: sluice.GCRA, Limit: 3, Period: time.Second}), Key: Metadata("k")}
	unnamed := Limit{Limiter: newLimiter(t, store, sluice.Policy{Algorithm: sluice.GCRA, Limit: 3, Period: time.Second}), Key: Metadata("k")}
	for _, c := range []struct {
		opts []Option
		want string
	}{
		{[]Option{Method("Check", 1, l)}, `method "Check"`},
		{[]Option{Method("/a/b/c", 1, l)}, `method "/a/b/c"`},
		{[]Option{Method("/s/m", 1, l), Method("/s/m", 1, l)}, "given twice"},
		{[]Option{Method("/s/m", -2, l)}, "cost -2"},
		{[]Option{Method("/s/m", 0, l)}, `method "/s/m": cost 0: must be at least 1`},
		{[]Option{Method("/s/m", 4, l)}, `cost 4 exceeds the capacity 3 of policy "a"`},
		{[]Option{Global(l), Method("/s/m", 1, l)}, `method "/s/m": limit 0: policy Name "a" is already used by Global limit 0`},
		{[]Option{Default(1, Limit{Limiter: l.Limiter})}, "Default: limit 0: Key is nil"},
		// Defect 12: the error named `policy name ""`, not the limits.
		{[]Option{Global(unnamed), Method("/s/m", 1, unnamed)}, `method "/s/m": limit 0: policy Name is empty, as is Global limit 0's`},
		{[]Option{Global(l), Method("/s/m", 1, Limit{Key: Metadata("k")})}, `method "/s/m": limit 0: Limiter is nil`},
		// A limit is named by its index where it was given, not counting
		// the Global limits (as in httplimit).
		{[]Option{Global(l), Method("/s/m", 1, Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "b", Algorithm: sluice.GCRA, Limit: 3, Period: time.Second}), Key: Metadata("k")}, Limit{Key: Metadata("k")})}, `method "/s/m": limit 1: Limiter is nil`},
		{[]Option{Global(l), Method("/s/m", 1, Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "b", Algorithm: sluice.GCRA, Limit: 3, Period: time.Second}), Key: Metadata("k")}, Limit{Limiter: l.Limiter})}, `method "/s/m": limit 1: Key is nil`},
		// A zero sluice.Limiter (not made by NewLimiter) is named as such.
		{[]Option{Method("/s/m", 1, Limit{Limiter: &sluice.Limiter{}, Key: Metadata("k")})}, `method "/s/m": limit 0: the Limiter has no store (make it with sluice.NewLimiter)`},
		{[]Option{WithMaxDelay(-1)}, "WithMaxDelay"},
		{[]Option{WithRetryJitter(-1)}, "WithRetryJitter"},
		{[]Option{WithUnavailableRetryAfter(0)}, "WithUnavailableRetryAfter"},
	} {
		_, err := New(c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v; want an error containing %q", err, c.want)
		}
	}
}

// TestConfigErrorsNameTheCulprit: a mistake in a Global limit is blamed on
// it ("Global limit 0"), not on Default, which the user never gave, nor on
// a method it was added to.
func TestConfigErrorsNameTheCulprit(t *testing.T) {
	store, _ := newStore(t)
	l := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "a", Algorithm: sluice.GCRA, Limit: 3, Period: time.Second}), Key: Metadata("k")}
	for _, c := range []struct {
		opts []Option
		want string
	}{
		{[]Option{Global(Limit{Key: Metadata("x-api-key")})}, "grpclimit: Global limit 0: Limiter is nil"},
		{[]Option{Method("/s/m", 1, l), Global(l, Limit{Limiter: l.Limiter})}, "grpclimit: Global limit 1: Key is nil"},
		{[]Option{Default(1, l), Global(l, l)}, `grpclimit: Global limit 1: policy Name "a" is already used by Global limit 0: each limit of a route needs its own`},
	} {
		if _, err := New(c.opts...); err == nil || err.Error() != c.want {
			t.Errorf("got %v; want %q", err, c.want)
		}
	}
}

// TestConfigErrorsEmptyMetadataName: Metadata("") (or a name of spaces)
// names no metadata, so a limit keyed by it would count every call under
// the one key of the calls without a key; New refuses it, naming the
// option, the limit and the value.
func TestConfigErrorsEmptyMetadataName(t *testing.T) {
	store, _ := newStore(t)
	l := newLimiter(t, store, sluice.Policy{Name: "a", Algorithm: sluice.GCRA, Limit: 3, Period: time.Second})
	f, err := inflight.New(store, "f", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts []Option
		want string
	}{
		{[]Option{Global(Limit{Limiter: l, Key: Metadata("")})}, `grpclimit: Global limit 0: Key Metadata("") or a name of spaces: no call carries such metadata`},
		{[]Option{Method("/s/m", 1, Limit{Limiter: l, Key: Metadata(" ")})}, `grpclimit: method "/s/m": limit 0: Key Metadata("") or a name of spaces: no call carries such metadata`},
		{[]Option{InFlight("/s/m", InFlightLimit{InFlight: f, Key: Metadata("")})}, `grpclimit: InFlight "/s/m": limit 0: Key Metadata("") or a name of spaces: no call carries such metadata`},
	} {
		if _, err := New(c.opts...); err == nil || err.Error() != c.want {
			t.Errorf("got %v; want %q", err, c.want)
		}
	}
	if _, err := New(Global(Limit{Limiter: l, Key: Metadata("x-api-key")}), InFlight("", InFlightLimit{InFlight: f, Key: PeerIP(nil)})); err != nil {
		t.Errorf("a metadata name and PeerIP: %v", err)
	}
}

func TestMetadataLongKeyHashed(t *testing.T) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", strings.Repeat("k", 1000)))
	key, ok := Metadata("x-api-key")(ctx, check)
	if !ok || !strings.HasPrefix(key, "sha256:") || len(key) != len("sha256:")+64 {
		t.Errorf("key %q", key)
	}
	if _, ok := Metadata("x-api-key")(metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "  ")), check); ok {
		t.Error("blank key accepted")
	}
}

// Leaky-bucket calls are held for their delay, up to the maximum; the
// interceptor is called directly, in a synctest bubble.
func TestLeakyDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithClock(clock.Monotonic()), memstore.WithSweepInterval(0))
		defer store.Close()
		l := newLimiter(t, store, sluice.Policy{Name: "ingest", Algorithm: sluice.LeakyBucket, Limit: 2, Period: time.Second, Burst: 10})
		i, err := New(Global(Limit{Limiter: l, Key: Metadata("x-api-key")}), WithMaxDelay(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k"))
		start := time.Now()
		got := make([]error, 4)
		ran := make([]time.Duration, 4)
		for n := range 4 { // delays 0, 0.5 s, 1 s, then 1.5 s: too long
			go func() {
				_, got[n] = i.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: check}, func(context.Context, any) (any, error) {
					ran[n] = time.Since(start)
					return nil, nil
				})
			}()
			synctest.Wait()
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for n := range 3 {
			if got[n] != nil || ran[n] != time.Duration(n)*500*time.Millisecond {
				t.Errorf("call %d: %v, ran at %v; want OK at %v", n, got[n], ran[n], time.Duration(n)*500*time.Millisecond)
			}
		}
		ri, _ := details(t, got[3])
		if status.Code(got[3]) != codes.ResourceExhausted || ri == nil || ri.RetryDelay.AsDuration() != 500*time.Millisecond {
			t.Errorf("call 3: %v, %v; want ResourceExhausted retrying after 0.5s", got[3], ri)
		}
		if st := i.Stats(); st.Delayed != 2 || st.Refused != 1 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestRetryJitter(t *testing.T) {
	store, _ := newStore(t)
	l := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Minute})
	i, err := New(Global(Limit{Limiter: l, Key: Metadata("x-api-key")}), WithRetryJitter(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k"))
	info := &grpc.UnaryServerInfo{FullMethod: check}
	ok := func(context.Context, any) (any, error) { return nil, nil }
	if _, err := i.Unary()(ctx, nil, info, ok); err != nil {
		t.Fatal(err)
	}
	seen := map[time.Duration]bool{}
	for range 50 {
		_, err := i.Unary()(ctx, nil, info, ok)
		ri, _ := details(t, err)
		if ri == nil {
			t.Fatalf("%v: no RetryInfo", err)
		}
		d := ri.RetryDelay.AsDuration()
		if d < time.Minute || d >= time.Minute+5*time.Second {
			t.Fatalf("RetryInfo %v; want 1m plus less than 5s", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Errorf("50 refusals, RetryInfo always %v: no jitter", seen)
	}
}

// TestStoreFailureLocal: a limit that fails local decides with its share
// while the store fails: the call proceeds until the share is spent, then
// it is refused with ResourceExhausted, as by the limit.
func TestStoreFailureLocal(t *testing.T) {
	store, clock := newStore(t)
	local := memstore.New(memstore.WithClock(clock))
	defer local.Close()
	o := &outage{Store: store}
	l := newLimiter(t, o, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 4, Period: time.Minute},
		sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, sluice.FixedReplicas(2)))
	i, _ := New(Global(Limit{Limiter: l, Key: Metadata("x-api-key")}))
	c := serve(t, i, false)
	o.down.Store(true)
	for n, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		if _, err := c.Check(withKey("k"), &healthpb.HealthCheckRequest{}); status.Code(err) != want {
			t.Errorf("call %d: %v, want %v (a share of 2 of 4)", n, err, want)
		}
	}
}

// TestClientGone: a call whose client has gone (its context cancelled)
// never reaches the handler and is no store error, whatever the failure
// mode (defect 6: 10 cancelled calls at 1/hour all reached it, each counted
// as a store error).
func TestClientGone(t *testing.T) {
	for _, mode := range []sluice.FailureMode{sluice.FailOpen, sluice.FailClosed} {
		store, _ := newStore(t)
		l := newLimiter(t, store, sluice.Policy{Name: "hourly", Algorithm: sluice.TokenBucket, Limit: 1, Period: time.Hour}, sluice.WithFailureMode(mode))
		i, err := New(Global(Limit{Limiter: l, Key: Metadata("x-api-key")}))
		if err != nil {
			t.Fatal(err)
		}
		reached := 0
		handler := func(context.Context, any) (any, error) { reached++; return nil, nil }
		unary := i.Unary()
		for range 10 {
			ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k")))
			cancel()
			if _, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: check}, handler); status.Code(err) != codes.Canceled {
				t.Errorf("%v: %v; want Canceled", mode, err)
			}
		}
		if st := i.Stats(); reached != 0 || st.Gone != 10 || st.Errors != 0 || st.Admitted != 0 {
			t.Errorf("%v: %d reached the handler, stats %+v; want none, 10 gone, no errors", mode, reached, st)
		}
	}
}
