// SPDX-License-Identifier: Apache-2.0

// Package grpclimit rate-limits gRPC servers with sluice: unary and stream
// server interceptors that check several limits per call all-or-nothing,
// keyed by incoming metadata (an API key), the peer's address, or any
// function of the call.
//
// A refused call fails with codes.ResourceExhausted carrying a
// google.rpc.RetryInfo detail (the exact wait after which the same call
// would be admitted) and a google.rpc.QuotaFailure detail naming the
// violated policies; a call no wait can admit carries no RetryInfo. When
// the store fails, each limiter's failure mode decides: the call fails with
// codes.Unavailable and a RetryInfo if an enforced limit fails closed
// (sluice.FailClosed), with codes.ResourceExhausted if a limit that fails
// local (sluice.FailLocal) refused it on its local share, and proceeds
// otherwise (limits that fail open, and local shares that admit it).
//
// A stream is checked once, when it opens, at its method's cost; the
// messages on it are not limited.
//
//	perKey := grpclimit.Limit{Limiter: keyLimiter, Key: grpclimit.Metadata("x-api-key")}
//	perIP := grpclimit.Limit{Limiter: ipLimiter, Key: grpclimit.PeerIP(ip)}
//	i, err := grpclimit.New(
//		grpclimit.Global(perIP),
//		grpclimit.Method("/shop.v1.Orders/Create", 5, perKey),
//		grpclimit.Method("/shop.v1.Catalog/", 1, perKey), // every method of the service
//	)
//	...
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(i.Unary()), grpc.ChainStreamInterceptor(i.Stream()))
package grpclimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// KeyFunc returns the key a call counts against under one limit, and false
// when the limit does not apply to the call. fullMethod is
// "/package.Service/Method". It must be safe for concurrent use.
type KeyFunc func(ctx context.Context, fullMethod string) (key string, ok bool)

// Metadata returns a KeyFunc that keys a call by the first value of the
// named incoming metadata key (an API key, say; names are lower-cased as
// gRPC does). A call without it, or with an empty value, is not subject to
// the limit. Values longer than httplimit.MaxKeyLen are hashed.
func Metadata(name string) KeyFunc {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (string, bool) {
		vals := metadata.ValueFromIncomingContext(ctx, name)
		if len(vals) == 0 {
			return "", false
		}
		v := strings.TrimSpace(vals[0])
		if v == "" {
			return "", false
		}
		if len(v) > httplimit.MaxKeyLen {
			sum := sha256.Sum256([]byte(v))
			return "sha256:" + hex.EncodeToString(sum[:]), true
		}
		return v, true
	}
}

// PeerIP returns a KeyFunc that keys a call by its client's address as ip
// resolves it: the peer's address, normalised and aggregated (IPv6 to a
// /64 by default), or behind trusted proxies the address they pass on in
// the x-forwarded-for, forwarded or x-real-ip metadata (whichever ip was
// told to trust). A nil ip keys by the peer's address with the defaults of
// httplimit.NewClientIP. A peer that is not an IP address (a Unix socket,
// an in-memory connection) is not subject to the limit.
func PeerIP(ip *httplimit.ClientIP) KeyFunc {
	if ip == nil {
		ip, _ = httplimit.NewClientIP()
	}
	return func(ctx context.Context, _ string) (string, bool) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", false
		}
		r := &http.Request{RemoteAddr: p.Addr.String()}
		for _, k := range [...]string{"x-forwarded-for", "forwarded", "x-real-ip"} {
			if v := metadata.ValueFromIncomingContext(ctx, k); len(v) > 0 {
				if r.Header == nil {
					r.Header = http.Header{}
				}
				r.Header[http.CanonicalHeaderKey(k)] = v
			}
		}
		return ip.Key(r)
	}
}

// Limit is one limit a call is checked against. All the Limits of one call
// are checked in one sluice.AllowAll batch, so their Limiters must share
// one Store.
type Limit struct {
	// Limiter applies the policy; its Name names it in QuotaFailure.
	Limiter *sluice.Limiter
	// Key picks the call's key; when it reports false the limit does not
	// apply.
	Key KeyFunc
	// Shadow makes the limit decide and record but never refuse: a call it
	// would have refused is counted in Stats, reported to OnShadowRefusal,
	// and proceeds.
	Shadow bool
}

// ShadowRefusal describes a call a shadow limit would have refused.
type ShadowRefusal struct {
	// FullMethod is the call's method, "/package.Service/Method".
	FullMethod string
	// Policy is the shadow limit's policy.
	Policy sluice.Policy
	// Key is the key the call counted against.
	Key string
	// Decision is the refusal that was not enforced.
	Decision sluice.Decision
}

// Stats counts what an Interceptor did since New.
type Stats struct {
	// Admitted counts calls let through, including those admitted because
	// the store failed open.
	Admitted uint64
	// Refused counts calls failed with ResourceExhausted.
	Refused uint64
	// Delayed counts admitted calls held for a leaky-bucket delay.
	Delayed uint64
	// ShadowRefused counts refusals of shadow limits that were not enforced.
	ShadowRefused uint64
	// Errors counts calls the store could not decide.
	Errors uint64
	// Unavailable counts calls failed with Unavailable because the store
	// failed and a limit fails closed.
	Unavailable uint64
}

// Interceptor holds the limits of a gRPC server. It is safe for concurrent
// use.
type Interceptor struct {
	methods     map[string]*route
	def         *route
	global      []Limit
	maxDelay    time.Duration
	jitter      time.Duration
	unavailable time.Duration
	onShadow    func(context.Context, ShadowRefusal)
	onError     func(context.Context, string, error)
	inflight    map[string][]InFlightLimit // by method; "" for every call (inflight.go)

	admitted, refused, delayed, shadowRefused, errs, unavail atomic.Uint64
}

type route struct {
	name      string
	cost      int64
	own       []Limit
	limits    []Limit // enforced first, then shadow
	nEnforced int
	leaky     bool
}

// New returns an Interceptor. It fails, naming the culprit, on a malformed
// method name, a negative cost or one a limit could never admit, a Limit
// without a Limiter or Key, or two limits of one method with the same
// policy name.
func New(opts ...Option) (*Interceptor, error) {
	i := &Interceptor{methods: map[string]*route{}, maxDelay: httplimit.DefaultMaxDelay, unavailable: time.Second}
	for _, o := range opts {
		if err := o(i); err != nil {
			return nil, err
		}
	}
	if i.def == nil && len(i.global) > 0 {
		i.def = &route{cost: 1}
	}
	for _, rt := range i.methods {
		if err := i.compile(rt); err != nil {
			return nil, err
		}
	}
	if i.def != nil {
		if err := i.compile(i.def); err != nil {
			return nil, err
		}
	}
	return i, nil
}

func (i *Interceptor) compile(rt *route) error {
	name := "method " + fmt.Sprintf("%q", rt.name)
	if rt.name == "" {
		name = "Default"
	}
	if rt.cost < 0 {
		return fmt.Errorf("grpclimit: %s: cost %d: must be >= 0", name, rt.cost)
	}
	all := append(append([]Limit(nil), i.global...), rt.own...)
	seen := map[string]bool{}
	for shadow := range 2 {
		for n, l := range all {
			if l.Shadow != (shadow == 1) {
				continue
			}
			if l.Limiter == nil || l.Key == nil {
				return fmt.Errorf("grpclimit: %s: limit %d: Limiter and Key must both be set", name, n)
			}
			p := l.Limiter.Policy()
			if seen[p.Name] {
				return fmt.Errorf("grpclimit: %s: policy name %q used by two limits", name, p.Name)
			}
			seen[p.Name] = true
			capacity := p.Limit
			if p.Algorithm.IsBucket() && p.Burst != 0 {
				capacity = p.Burst
			}
			if rt.cost > capacity {
				return fmt.Errorf("grpclimit: %s: cost %d exceeds the capacity %d of policy %q: no call could ever be admitted", name, rt.cost, capacity, p.Name)
			}
			rt.limits = append(rt.limits, l)
			if !l.Shadow {
				rt.nEnforced++
				rt.leaky = rt.leaky || p.Algorithm == sluice.LeakyBucket
			}
		}
	}
	return nil
}

// Stats returns the counts so far.
func (i *Interceptor) Stats() Stats {
	return Stats{
		Admitted: i.admitted.Load(), Refused: i.refused.Load(), Delayed: i.delayed.Load(),
		ShadowRefused: i.shadowRefused.Load(), Errors: i.errs.Load(), Unavailable: i.unavail.Load(),
	}
}

// Unary returns the unary server interceptor.
func (i *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		if err := i.check(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		release, err := i.acquire(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		defer func() { release(err) }() // also when the handler panics
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor: a stream is checked once,
// when it opens.
func (i *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		if err := i.check(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		release, err := i.acquire(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		defer func() { release(err) }() // also when the handler panics
		return handler(srv, ss)
	}
}

func (i *Interceptor) match(method string) *route {
	if rt, ok := i.methods[method]; ok {
		return rt
	}
	if j := strings.LastIndexByte(method, '/'); j > 0 {
		if rt, ok := i.methods[method[:j+1]]; ok {
			return rt
		}
	}
	return i.def
}

// check decides a call: nil to proceed (after any leaky-bucket delay), or
// the status error to return.
func (i *Interceptor) check(ctx context.Context, method string) error {
	rt := i.match(method)
	if rt == nil || len(rt.limits) == 0 {
		return nil
	}
	var checkBuf [8]sluice.Check
	var whichBuf [8]int
	checks, which := checkBuf[:0], whichBuf[:0]
	nEnf := 0
	for n, l := range rt.limits {
		key, ok := l.Key(ctx, method)
		if !ok {
			continue
		}
		checks = append(checks, sluice.Check{Limiter: l.Limiter, Key: key, Cost: rt.cost, Peek: rt.cost == 0})
		which = append(which, n)
		if !l.Shadow {
			nEnf++
		}
	}
	if len(checks) == 0 {
		i.admitted.Add(1)
		return nil
	}
	if rt.leaky {
		for j := range nEnf {
			l := rt.limits[which[j]]
			if l.Limiter.Policy().Algorithm != sluice.LeakyBucket {
				continue
			}
			d, err := l.Limiter.AllowN(ctx, checks[j].Key, 0)
			if err == nil && d.Delay > i.maxDelay {
				i.refused.Add(1)
				return refusal([]string{l.Limiter.Policy().Name}, i.withJitter(d.Delay-i.maxDelay), false)
			}
		}
	}
	res, err := sluice.AllowAll(ctx, checks...)
	if err == nil && !res.Allowed && nEnf < len(checks) {
		enforcedOK := true
		for j, d := range res.Decisions {
			switch {
			case d.Allowed:
			case j < nEnf:
				enforcedOK = false
			default:
				i.shadowRefused.Add(1)
				if i.onShadow != nil {
					i.onShadow(ctx, ShadowRefusal{FullMethod: method, Policy: rt.limits[which[j]].Limiter.Policy(), Key: checks[j].Key, Decision: d})
				}
			}
		}
		if enforcedOK {
			res, err = sluice.AllowAll(ctx, checks[:nEnf]...)
		}
	}
	if err != nil {
		i.errs.Add(1)
		if i.onError != nil {
			i.onError(ctx, method, err)
		}
		var local []string
		var wait time.Duration
		for j, c := range checks[:nEnf] {
			if c.Limiter.FailureMode() == sluice.FailLocal && j < len(res.Decisions) && !res.Decisions[j].Allowed {
				// Its local share (sluice.FailLocal) is spent.
				local = append(local, c.Limiter.Policy().Name)
				wait = max(wait, res.Decisions[j].RetryAfter)
			}
			if c.Limiter.FailureMode() == sluice.FailClosed {
				i.unavail.Add(1)
				st, _ := status.New(codes.Unavailable, "grpclimit: the rate limiter's store failed and policy "+
					fmt.Sprintf("%q", c.Limiter.Policy().Name)+" fails closed").
					WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(i.unavailable)})
				return st.Err()
			}
		}
		if len(local) > 0 {
			i.refused.Add(1)
			return refusal(local, i.withJitter(wait), false)
		}
		i.admitted.Add(1)
		return nil
	}
	if !res.Allowed {
		var violated []string
		var wait time.Duration
		impossible := false
		for j, d := range res.Decisions[:nEnf] {
			if !d.Allowed {
				violated = append(violated, checks[j].Limiter.Policy().Name)
				wait = max(wait, d.RetryAfter)
				impossible = impossible || d.Impossible
			}
		}
		i.refused.Add(1)
		return refusal(violated, i.withJitter(wait), impossible)
	}
	var delay time.Duration
	for _, d := range res.Decisions[:nEnf] {
		delay = max(delay, d.Delay)
	}
	if delay > 0 {
		i.delayed.Add(1)
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	i.admitted.Add(1)
	return nil
}

// withJitter adds the configured random jitter to d.
func (i *Interceptor) withJitter(d time.Duration) time.Duration {
	if i.jitter > 0 {
		d += rand.N(i.jitter)
	}
	return d
}

// refusal is the ResourceExhausted error of a refused call.
func refusal(violated []string, wait time.Duration, impossible bool) error {
	q := &errdetails.QuotaFailure{}
	for _, name := range violated {
		q.Violations = append(q.Violations, &errdetails.QuotaFailure_Violation{Subject: "policy:" + name, Description: "quota exceeded"})
	}
	msg := fmt.Sprintf("grpclimit: quota exceeded for %q", violated)
	var st *status.Status
	var err error
	if impossible {
		st, err = status.New(codes.ResourceExhausted, msg+": the call costs more than the policy's capacity").WithDetails(q)
	} else {
		st, err = status.New(codes.ResourceExhausted, msg+fmt.Sprintf("; retry after %v", wait)).
			WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}, q)
	}
	if err != nil { // cannot happen: the details are valid messages
		return status.Error(codes.ResourceExhausted, msg)
	}
	return st.Err()
}
