// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	envoytype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// RegisterGRPC registers the server as Envoy's
// envoy.service.ratelimit.v3.RateLimitService and
// envoy.service.rate_limit_quota.v3.RateLimitQuotaService (package rlqs)
// on g.
func (s *Server) RegisterGRPC(g grpc.ServiceRegistrar) {
	g.RegisterService(&rlsService, rlsServer{s: s})
	s.rlqs.Register(g)
}

// rlsService is RateLimitService as the generated code registers it, but
// its request is decoded into an rlsCall, so that a request over the
// bounds (MaxDescriptors, config.MaxDepth) is refused as InvalidArgument
// before it is decoded.
var rlsService = grpc.ServiceDesc{
	ServiceName: "envoy.service.ratelimit.v3.RateLimitService",
	HandlerType: (*rls.RateLimitServiceServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: shouldRateLimit}},
	Metadata:    "envoy/service/ratelimit/v3/rls.proto",
}

// shouldRateLimit is the generated handler of ShouldRateLimit, with the
// request decoded into an rlsCall.
func shouldRateLimit(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	var call rlsCall
	if err := dec(&call); err != nil {
		return nil, err
	}
	if call.refused != "" {
		return nil, status.Error(codes.InvalidArgument, call.refused)
	}
	if interceptor == nil {
		return srv.(rls.RateLimitServiceServer).ShouldRateLimit(ctx, call.req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: rls.RateLimitService_ShouldRateLimit_FullMethodName}
	return interceptor(ctx, call.req, info, func(ctx context.Context, req any) (any, error) {
		return srv.(rls.RateLimitServiceServer).ShouldRateLimit(ctx, req.(*rls.RateLimitRequest))
	})
}

// The gRPC server's bounds (GRPCServerOptions), as NewHTTPServer's
// timeouts bound the HTTP port. A client holds at most
// MaxConcurrentStreams streams on one connection, each a goroutine and its
// buffers; a stream past them is refused (RST_STREAM REFUSED_STREAM) and
// costs nothing. A stream a client opens and never sends its message on
// (a unary call without a deadline) is held for as long as the connection
// lives, so a connection that is open and answers pings holds at most
// MaxConcurrentStreams goroutines; one whose peer has gone is closed
// KeepaliveTime + KeepaliveTimeout after its last frame, and one with no
// stream open, after MaxConnectionIdle.
//
//   - MaxConcurrentStreams: Envoy's HTTP/2 client honours the server's
//     SETTINGS_MAX_CONCURRENT_STREAMS and opens another connection past it,
//     so nothing Envoy sends is refused. 256 calls in flight on one
//     connection at Envoy's default 20 ms timeout are 12,800 decisions a
//     second on that connection alone. It was grpc-go's default, 2^32-1:
//     3000 stalled streams on one connection held 2,936 goroutines.
//   - MaxConnectionIdle: a connection with no stream open (an Envoy
//     with no traffic, a client that left its connection open) is sent a
//     GOAWAY; Envoy opens a new one for its next call.
//   - KeepaliveTime, KeepaliveTimeout: a connection silent for
//     KeepaliveTime is pinged and closed if the ping is not answered in
//     KeepaliveTimeout: an Envoy that vanished (its node gone, no FIN)
//     releases its streams, an RLQS stream's record among them, within
//     40 s rather than the operating system's TCP timeout (a stopped
//     process, whose kernel still acknowledges, never). A live Envoy is
//     never pinged: its RLQS stream reports every 5 s, and an idle
//     connection costs one PING every 30 s.
//   - KeepaliveMinTime: a client may ping as often as every 5 s, with or
//     without a stream open (grpc-go's default, 5 minutes and only with a
//     stream, answers a client that pings more often with GOAWAY
//     too_many_pings). Envoy sends none by default; its
//     connection_keepalive, when set, pings at the interval it is given,
//     and a gRPC client's keepalive every 10 s or more.
//
// No MaxConnectionAge: RLQS streams (RegisterGRPC, on the same server) are
// long-lived bidirectional streams, which an age would end after its grace
// however long the grace; an ended stream drops its record and its share
// goes to the other streams at the next tick, while its Envoy enforces its
// last assignment until its TTL: outside the bound the rlqs package states.
const (
	MaxConcurrentStreams = 256
	MaxConnectionIdle    = 5 * time.Minute
	KeepaliveTime        = 30 * time.Second
	KeepaliveTimeout     = 10 * time.Second
	KeepaliveMinTime     = 5 * time.Second
)

// GRPCServerOptions returns the options that set the gRPC server's bounds
// above, for grpc.NewServer.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: MaxConnectionIdle,
			Time:              KeepaliveTime,
			Timeout:           KeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
	}
}

type rlsServer struct {
	rls.UnimplementedRateLimitServiceServer
	s *Server
}

// ShouldRateLimit implements Envoy's RLS v3.
//
// Hits: the request's hits_addend, where 0 means 1 as Envoy documents (the
// field cannot say "unset"), applies to every descriptor; a descriptor's own
// hits_addend, when set, overrides it, and 0 there peeks: nothing is taken
// and the status reports the state.
func (r rlsServer) ShouldRateLimit(ctx context.Context, req *rls.RateLimitRequest) (*rls.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "domain: must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "descriptors: must not be empty")
	}
	// Over gRPC the codec has checked the bounds already (overBounds).
	if msg := descriptorsBound(len(req.GetDescriptors())); msg != "" {
		return nil, status.Error(codes.InvalidArgument, msg)
	}
	hits := int64(req.GetHitsAddend())
	if hits == 0 {
		hits = 1
	}
	descs := make([]descriptor, len(req.GetDescriptors()))
	for i, d := range req.GetDescriptors() {
		if msg := entriesBound(i, len(d.GetEntries())); msg != "" {
			return nil, status.Error(codes.InvalidArgument, msg)
		}
		dd, err := fromProto(d, hits)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "descriptors[%d]: %v", i, err)
		}
		descs[i] = dd
	}
	allowed, outs, err := r.s.check(ctx, apiOf(ctx), req.GetDomain(), descs)
	if err != nil {
		if errors.Is(err, errGone) {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if errors.Is(err, errUnavailable) {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	resp := &rls.RateLimitResponse{OverallCode: rls.RateLimitResponse_OK, Statuses: make([]*rls.RateLimitResponse_DescriptorStatus, len(outs))}
	if !allowed {
		resp.OverallCode = rls.RateLimitResponse_OVER_LIMIT
	}
	now := r.s.now()
	for i := range outs {
		resp.Statuses[i] = toProto(&outs[i], now)
	}
	resp.DynamicMetadata = dynamicMetadata(outs)
	if r.s.headers {
		resp.ResponseHeadersToAdd = responseHeaders(outs, allowed, r.s.legacyHeaders, now)
	}
	return resp, nil
}

func fromProto(d *rlcommon.RateLimitDescriptor, hits int64) (descriptor, error) {
	dd := descriptor{hits: hits, entries: make([]config.Entry, len(d.GetEntries()))}
	// A refund is refused whether the hits are the descriptor's own
	// hits_addend or the request's: taken as a hit, it would spend the
	// budget it meant to give back.
	if d.GetIsNegativeHits() {
		return dd, errors.New("is_negative_hits: refunds are not supported")
	}
	if len(d.GetEntries()) == 0 {
		// No rule matches an empty descriptor, and it carries no key for
		// a limit of its own: it is OK, and the request's other
		// descriptors are decided, as in envoyproxy/ratelimit. (Refusing
		// the whole request would make Envoy admit it unlimited.)
		return dd, nil
	}
	for j, e := range d.GetEntries() {
		dd.entries[j] = config.Entry{Key: e.GetKey(), Value: e.GetValue()}
	}
	if h := d.GetHitsAddend(); h != nil {
		if h.GetValue() > math.MaxInt64 {
			return dd, fmt.Errorf("hits_addend %d: too large", h.GetValue())
		}
		dd.hits = int64(h.GetValue())
	}
	if o := d.GetLimit(); o != nil {
		unit, ok := overrideUnits[o.GetUnit()]
		if !ok {
			return dd, fmt.Errorf("limit.unit %v: not a known unit", o.GetUnit())
		}
		if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 0 {
			if time.Duration(m.GetValue()) > sluice.MaxPeriod/unit {
				return dd, fmt.Errorf("limit.unit_multiplier %d: %v × %d exceeds the longest period, %v", m.GetValue(), unit, m.GetValue(), sluice.MaxPeriod)
			}
			unit *= time.Duration(m.GetValue())
		}
		// requests_per_unit 0 is a limit of zero, as envoyproxy/ratelimit
		// builds it: every hit of the descriptor is over (overrideRule).
		dd.override = &sluice.Policy{Algorithm: sluice.FixedWindow, Limit: int64(o.GetRequestsPerUnit()), Period: unit}
	}
	return dd, nil
}

var overrideUnits = map[envoytype.RateLimitUnit]time.Duration{
	envoytype.RateLimitUnit_SECOND: time.Second,
	envoytype.RateLimitUnit_MINUTE: time.Minute,
	envoytype.RateLimitUnit_HOUR:   time.Hour,
	envoytype.RateLimitUnit_DAY:    24 * time.Hour,
	envoytype.RateLimitUnit_MONTH:  30 * 24 * time.Hour,
	envoytype.RateLimitUnit_YEAR:   365 * 24 * time.Hour,
}

var protoUnits = map[string]rls.RateLimitResponse_RateLimit_Unit{
	"second": rls.RateLimitResponse_RateLimit_SECOND,
	"minute": rls.RateLimitResponse_RateLimit_MINUTE,
	"hour":   rls.RateLimitResponse_RateLimit_HOUR,
	"day":    rls.RateLimitResponse_RateLimit_DAY,
	"week":   rls.RateLimitResponse_RateLimit_WEEK,
	"month":  rls.RateLimitResponse_RateLimit_MONTH,
	"year":   rls.RateLimitResponse_RateLimit_YEAR,
}

// toProto is one descriptor's status, as envoyproxy/ratelimit answers it.
// duration_until_reset is in whole seconds, rounded up: Envoy truncates it
// into X-RateLimit-Reset, so a fraction would tell clients to come back
// early. A fixed window's is the time left in the current window even when
// the key has taken nothing in it, and a zero-limit (deny) rule's is the
// time left in the window of its unit: envoyproxy/ratelimit sends
// unit − now % unit for both (for a calendar rule, the time to the end of
// its calendar window).
func toProto(o *outcome, now time.Time) *rls.RateLimitResponse_DescriptorStatus {
	st := &rls.RateLimitResponse_DescriptorStatus{Code: rls.RateLimitResponse_OK}
	r := o.rule
	switch {
	case r == nil:
		return st
	case r.Unlimited:
		st.LimitRemaining = math.MaxUint32
		return st
	}
	if o.over {
		st.Code = rls.RateLimitResponse_OVER_LIMIT
	}
	cl := &rls.RateLimitResponse_RateLimit{Name: r.Title(), Unit: protoUnits[r.Unit]}
	if r.Deny {
		if _, d := denyState(r, now); d.ResetAfter > 0 {
			st.DurationUntilReset = durationpb.New(ceilSecond(d.ResetAfter))
		}
		return withLimit(st, cl)
	}
	cl.RequestsPerUnit = clampU32(r.Policy.Limit)
	if r.UnitMultiplier > 1 {
		cl.UnitMultiplier = wrapperspb.UInt32(clampU32(r.UnitMultiplier))
	}
	st.LimitRemaining = clampU32(o.decision.Remaining)
	reset := o.decision.ResetAfter
	if reset == 0 && r.Policy.Algorithm == sluice.FixedWindow {
		if r.Policy.Calendar.Unit != 0 {
			_, end := r.Policy.Calendar.Window(now)
			reset = end.Sub(now)
		} else {
			reset = windowLeft(r.Policy.Period, now)
		}
	}
	st.DurationUntilReset = durationpb.New(ceilSecond(reset))
	return withLimit(st, cl)
}

// windowLeft is the time from now to the end of the window of length p
// that holds now, windows aligned to multiples of p since the Unix epoch.
func windowLeft(p time.Duration, now time.Time) time.Duration {
	if p <= 0 {
		return 0
	}
	return p - time.Duration(now.UnixNano()%int64(p))
}

// ceilSecond rounds d up to a whole number of seconds.
func ceilSecond(d time.Duration) time.Duration {
	if r := d % time.Second; r > 0 {
		d += time.Second - r
	}
	return d
}

func withLimit(st *rls.RateLimitResponse_DescriptorStatus, cl *rls.RateLimitResponse_RateLimit) *rls.RateLimitResponse_DescriptorStatus {
	st.CurrentLimit = cl
	return st
}
