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
// A call whose context has ended (its client cancelled it, or its deadline
// passed) before it is decided, or while it is held for a leaky-bucket
// delay or an in-flight slot, fails with Canceled or DeadlineExceeded and
// is counted in Stats.Gone: it never reaches the handler and is not a
// store error, whatever the failure modes. A call whose leaky-bucket delay
// would pass its deadline fails with DeadlineExceeded at once, taking no
// place in the queue. A call a limit has no key for
// (no API key metadata, a peer that is no IP address) is limited under one
// key shared by all such calls unless the Limit's Missing says otherwise.
// No call takes an in-flight limit's reserve unless WithCriticalFunc vouches
// for it: metadata a client sets grants nothing by itself.
//
//	perKey := grpclimit.Limit{Limiter: keyLimiter, Key: grpclimit.Metadata("x-api-key")}
//	ip, _ := clientip.New() // the peer's address; see clientip.TrustProxies
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
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/internal/decide"
)

// KeyFunc returns the key a call counts against under one limit, and false
// when the limit does not apply to the call. fullMethod is
// "/package.Service/Method". It must be safe for concurrent use.
type KeyFunc func(ctx context.Context, fullMethod string) (key string, ok bool)

// MaxKeyLen is the longest metadata value Metadata uses as a key as it
// is; longer values are replaced by "sha256:" and their hex SHA-256.
const MaxKeyLen = decide.MaxKeyLen

// Metadata returns a KeyFunc that keys a call by the first value of the
// named incoming metadata key (an API key, say; names are lower-cased as
// gRPC does), trimmed of surrounding whitespace. It reports no key for a
// call without it, or with an empty value: the Limit's Missing then
// decides (by default such calls share one key). Values longer than
// MaxKeyLen are hashed. An empty name (or one of spaces) names no metadata:
// New refuses a limit keyed by it.
func Metadata(name string) KeyFunc {
	if strings.TrimSpace(name) == "" {
		return noMetadata
	}
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (string, bool) {
		vals := metadata.ValueFromIncomingContext(ctx, name)
		if len(vals) == 0 {
			return "", false
		}
		return decide.Key(vals[0])
	}
}

// noMetadata is Metadata's KeyFunc for an empty name, which no call
// carries. New tells it apart (noKey) and refuses it.
func noMetadata(context.Context, string) (string, bool) { return "", false }

// noKey says why f keys no call, or "" when it may: f is Metadata's
// function for an empty name. (Only this package's own function is told
// apart, by its code; a KeyFunc is never called to find out.)
func noKey(f KeyFunc) string {
	if f != nil && reflect.ValueOf(f).Pointer() == reflect.ValueOf(noMetadata).Pointer() {
		return `Metadata("") or a name of spaces: no call carries such metadata`
	}
	return ""
}

// metadataKeys are the forwarded headers' names as metadata keys.
var metadataKeys = [...]string{clientip.XForwardedFor: "x-forwarded-for", clientip.Forwarded: "forwarded", clientip.XRealIP: "x-real-ip"}

// PeerIP returns a KeyFunc that keys a call by its client's address as ip
// resolves it: the peer's address, normalised and aggregated (IPv6 to a
// /64 by default), or behind trusted proxies the address they pass on in
// the x-forwarded-for, forwarded or x-real-ip metadata (whichever ip was
// told to trust). A nil ip keys by the peer's address with clientip's
// defaults. A peer that is not an IP address (a Unix socket, an in-memory
// connection) has no key: the Limit's Missing decides.
func PeerIP(ip *clientip.Resolver) KeyFunc {
	return func(ctx context.Context, _ string) (string, bool) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", false
		}
		return ip.KeyFrom(p.Addr.String(), func(s clientip.Source) []string {
			return metadata.ValueFromIncomingContext(ctx, metadataKeys[s])
		})
	}
}

// Limit is one limit a call is checked against. All the Limits of one call
// are checked in one sluice.AllowAll batch, so their Limiters must share
// one Store.
type Limit struct {
	// Limiter applies the policy; its Name names it in QuotaFailure.
	Limiter *sluice.Limiter
	// Key picks the call's key; when it reports none, Missing decides.
	Key KeyFunc
	// Shadow makes the limit decide and record but never refuse: a call it
	// would have refused is counted in Stats, reported to OnShadowRefusal,
	// and proceeds.
	Shadow bool
	// Missing says what the limit does with a call Key reports no key for.
	// The zero value, MissingShared, counts all such calls under one shared
	// key: a call without the API key is limited, never let through
	// unlimited.
	Missing Missing
}

// Missing says what a Limit does with a call its Key reports no key for
// (no API key metadata, say). Under MissingShared, the zero value, every such
// call counts under one key shared by all of them (the empty key, which
// no key function of this package returns): they are limited together,
// never let through unlimited. Under MissingRefused such a call is
// failed with InvalidArgument; under MissingSkipped the limit does not apply to it (choose
// it only where another limit covers those calls).
type Missing = decide.Missing

// The values of Missing.
const (
	MissingShared  = decide.Share
	MissingRefused = decide.Reject
	MissingSkipped = decide.Skip
)

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
	// Refused counts calls a limit refused: failed with ResourceExhausted,
	// or with Unavailable by a method-wide in-flight limit (the server is
	// busy).
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
	// Gone counts calls whose client went away (their context ended)
	// before they were decided or while they were held: never passed to
	// the handler, and not store errors.
	Gone uint64
	// Malformed counts calls failed with InvalidArgument because a
	// MissingRefused limit had no key for them.
	Malformed uint64
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
	critical    func(ctx context.Context, fullMethod string) bool // WithCriticalFunc; nil: none
	inflight    map[string][]InFlightLimit                        // by method; "" for every call (inflight.go)

	counts decide.Counts
}

type route struct {
	name   string
	cost   int64
	own    []Limit
	limits []Limit // enforced first, then shadow
	leaky  bool
}

// New returns an Interceptor. It fails, naming the culprit, on a malformed
// method name, a negative cost or one a limit could never admit, a Limit
// without a Limiter or Key, two limits of one method with the same policy
// name, or an enforced leaky-bucket policy without a Name (WithMaxDelay).
func New(opts ...Option) (*Interceptor, error) {
	i := &Interceptor{methods: map[string]*route{}, maxDelay: DefaultMaxDelay, unavailable: time.Second}
	for _, o := range opts {
		if o == nil {
			continue // a nil option is no option
		}
		if err := o(i); err != nil {
			return nil, err
		}
	}
	def := i.def
	if len(i.global) > 0 {
		// The Global limits alone first, so that a mistake in one is blamed
		// on Global rather than on a method. Without Default, the calls no
		// Method matches face them alone, at cost 1.
		alone := &route{cost: 1}
		if err := i.compile("", alone); err != nil {
			return nil, err
		}
		if i.def == nil {
			i.def = alone
		}
	}
	for _, rt := range i.methods {
		if err := i.compile("method "+strconv.Quote(rt.name), rt); err != nil {
			return nil, err
		}
	}
	if def != nil {
		if err := i.compile("Default", def); err != nil {
			return nil, err
		}
	}
	return i, nil
}

// compile compiles the limits of rt (and the Global ones), named name in
// errors ("" for the Global limits alone).
func (i *Interceptor) compile(name string, rt *route) error {
	all := append(append([]Limit(nil), i.global...), rt.own...)
	specs := make([]decide.Spec, len(all))
	for n, l := range all {
		specs[n] = decide.Spec{Limiter: l.Limiter, Keyed: l.Key != nil, NoKey: noKey(l.Key), Shadow: l.Shadow}
	}
	order, _, err := decide.Order(name, rt.cost, len(i.global), specs)
	if err != nil {
		return fmt.Errorf("grpclimit: %w", err)
	}
	for _, n := range order {
		l := all[n]
		rt.limits = append(rt.limits, l)
		rt.leaky = rt.leaky || !l.Shadow && l.Limiter.Policy().Algorithm == sluice.LeakyBucket
	}
	return nil
}

// Stats returns the counts so far.
func (i *Interceptor) Stats() Stats {
	c := &i.counts
	return Stats{
		Admitted: c.Admitted.Load(), Refused: c.Refused.Load(), Delayed: c.Delayed.Load(),
		ShadowRefused: c.ShadowRefused.Load(), Errors: c.Errors.Load(), Unavailable: c.Unavailable.Load(),
		Gone: c.Gone.Load(), Malformed: c.Malformed.Load(),
	}
}

// Unary returns the unary server interceptor.
func (i *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		rated, failed, err := i.check(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		release, held, err := i.acquire(ctx, info.FullMethod, failed)
		if err != nil {
			return nil, err
		}
		defer func() { release(err) }() // also when the handler panics
		if rated || held {
			i.counts.Passed()
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor: a stream is checked once,
// when it opens.
func (i *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		rated, failed, err := i.check(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		release, held, err := i.acquire(ss.Context(), info.FullMethod, failed)
		if err != nil {
			return err
		}
		defer func() { release(err) }() // also when the handler panics
		if rated || held {
			i.counts.Passed()
		}
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

// check decides a call with the decision core: nil to proceed (after any
// leaky-bucket delay), or the status error to return; rated says the call
// had rate limits to decide it, failed that the store failed on them (and
// is counted in Stats.Errors).
func (i *Interceptor) check(ctx context.Context, method string) (rated, failed bool, err error) {
	rt := i.match(method)
	if rt == nil || len(rt.limits) == 0 {
		return false, false, nil
	}
	var checkBuf [8]sluice.Check
	var whichBuf [8]int
	checks, which := checkBuf[:0], whichBuf[:0]
	nEnf := 0
	for n, l := range rt.limits {
		key, ok := l.Key(ctx, method)
		key, use, reject := decide.KeyOf(key, ok, l.Missing)
		if reject {
			return true, false, i.missingKey("policy " + fmt.Sprintf("%q", l.Limiter.Policy().Name))
		}
		if !use {
			continue
		}
		checks = append(checks, sluice.Check{Limiter: l.Limiter, Key: key, Cost: rt.cost, Peek: rt.cost == 0})
		which = append(which, n)
		if !l.Shadow {
			nEnf++
		}
	}
	v := decide.Decide(ctx, decide.Request{Checks: checks, Enforced: nEnf, MaxDelay: i.maxDelay, Leaky: rt.leaky, Jitter: i.jitter})
	i.counts.Verdict(&v)
	for j, d := range v.Shadow {
		if !d.Allowed && i.onShadow != nil {
			i.onShadow(ctx, ShadowRefusal{FullMethod: method, Policy: rt.limits[which[nEnf+j]].Limiter.Policy(), Key: checks[nEnf+j].Key, Decision: d})
		}
	}
	if v.StoreFailed() && i.onError != nil {
		i.onError(ctx, method, v.Err)
	}
	var violated []string
	for k := range v.Decisions {
		if v.Violated(checks, k) {
			violated = append(violated, rt.limits[which[v.Offset+k]].Limiter.Policy().Name)
		}
	}
	failed = v.StoreFailed()
	switch v.Outcome {
	case decide.Admit:
		return true, failed, nil
	case decide.Refuse:
		return true, failed, refusal(violated, v.Wait, v.Impossible)
	case decide.Gone:
		return true, failed, status.FromContextError(v.Err).Err()
	}
	msg := "grpclimit: the rate limiter's store failed"
	if len(violated) > 0 {
		msg += fmt.Sprintf(" and %q fail closed", violated)
	}
	st, _ := status.New(codes.Unavailable, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(i.unavailable)})
	return true, failed, st.Err()
}

// missingKey is the InvalidArgument error of a call a MissingRefused limit,
// named by what, has no key for.
func (i *Interceptor) missingKey(what string) error {
	i.counts.NoKey()
	return status.Error(codes.InvalidArgument, "grpclimit: the call carries no key for "+what)
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
