// SPDX-License-Identifier: Apache-2.0

package grpclimit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/internal/decide"
)

// InFlightLimit bounds how many calls are in flight at once, across every
// process sharing its store (see inflight.Limiter). It is checked after the
// rate limits have admitted a call, and its slot is held until the handler
// returns (for a stream, until the stream ends).
type InFlightLimit struct {
	// InFlight is the limit, fixed or adaptive.
	InFlight *inflight.Limiter
	// Key picks a per-client key: a call over such a limit fails with
	// ResourceExhausted. When nil, every call of the method shares one
	// limit, and a call over it fails with Unavailable (the server is busy).
	Key KeyFunc
	// Missing says what the limit does with a call Key reports no key for,
	// as for Limit: by default such calls share one key.
	Missing Missing
}

// CriticalMetadata is the incoming metadata key CriticalFrom reads:
// "sluice-priority: critical" asks for the reserve of in-flight limits
// (inflight.WithReserve). The metadata alone grants nothing: only
// WithCriticalFunc does.
const CriticalMetadata = "sluice-priority"

// CriticalFrom returns a function for WithCriticalFunc: a call is critical
// when it carries "sluice-priority: critical" and trusted(ctx, fullMethod)
// reports true (a peer the server knows, say, or an authenticated
// internal caller). A nil trusted trusts nobody.
func CriticalFrom(trusted func(ctx context.Context, fullMethod string) bool) func(ctx context.Context, fullMethod string) bool {
	return func(ctx context.Context, fullMethod string) bool {
		v := metadata.ValueFromIncomingContext(ctx, CriticalMetadata)
		return len(v) > 0 && strings.EqualFold(strings.TrimSpace(v[0]), "critical") && trusted != nil && trusted(ctx, fullMethod)
	}
}

// inflightRetry is the RetryInfo delay of a call refused by an in-flight
// limit: slots free up as calls finish.
const inflightRetry = time.Second

// InFlight adds in-flight limits to the calls of method (as in Method: one
// method, or a service with a trailing slash), or of every call when method
// is "". A call faces the limits of "" and of its method (or, failing that,
// its service).
func InFlight(method string, limits ...InFlightLimit) Option {
	return func(i *Interceptor) error {
		if method != "" && (!strings.HasPrefix(method, "/") || strings.Count(method, "/") != 2 || method == "//") {
			return fmt.Errorf("grpclimit: InFlight %q: want \"\", \"/package.Service/Method\" or \"/package.Service/\"", method)
		}
		for n, l := range limits {
			if l.InFlight == nil {
				return fmt.Errorf("grpclimit: InFlight %q: limit %d: InFlight must be set", method, n)
			}
			if why := noKey(l.Key); why != "" {
				return fmt.Errorf("grpclimit: InFlight %q: limit %d: Key %s", method, n, why)
			}
		}
		if i.inflight == nil {
			i.inflight = map[string][]InFlightLimit{}
		}
		i.inflight[method] = append(i.inflight[method], limits...)
		return nil
	}
}

// acquire takes a slot of each in-flight limit of the call, returning the
// function that gives them back (reporting the handler's error to adaptive
// limits) and whether an in-flight limit decided the call, or the status
// error of a refusal. failed says the store failed on the call's rate
// limits (a call counts once in Stats.Errors).
func (i *Interceptor) acquire(ctx context.Context, method string, failed bool) (release func(error), held bool, err error) {
	if len(i.inflight) == 0 {
		return func(error) {}, false, nil
	}
	own, ok := i.inflight[method]
	if !ok {
		if j := strings.LastIndexByte(method, '/'); j > 0 {
			own = i.inflight[method[:j+1]]
		}
	}
	global := i.inflight[""]
	if len(own) == 0 && len(global) == 0 {
		return func(error) {}, false, nil
	}
	critical := i.critical != nil && i.critical(ctx, method)
	slots := new(decide.Slots)
	release = func(err error) {
		dropped := false
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
			dropped = true
		}
		slots.Release(ctx, dropped)
	}
	for _, list := range [][]InFlightLimit{global, own} {
		for _, l := range list {
			key := "*"
			if l.Key != nil {
				k, ok := l.Key(ctx, method)
				k, use, reject := decide.KeyOf(k, ok, l.Missing)
				if reject {
					slots.Cancel(ctx)
					return nil, true, i.missingKey(fmt.Sprintf("the in-flight limit %q", l.InFlight.Name()))
				}
				if !use {
					continue
				}
				key = k
			}
			t := slots.Take(ctx, l.InFlight, key, critical)
			failed = i.counts.Taken(t, failed)
			if t.StoreFailed() && i.onError != nil {
				i.onError(ctx, method, t.Err)
			}
			name := l.InFlight.Name()
			switch {
			case t.Outcome == decide.Admit:
				held = true
				continue
			case t.Outcome == decide.Gone:
				return nil, true, status.FromContextError(t.Err).Err()
			case t.Outcome == decide.Unavailable:
				return nil, true, inflightStatus(codes.Unavailable, fmt.Sprintf("grpclimit: in-flight limit %q cannot decide: %s", name, t.Cause()), name)
			}
			if l.Key != nil {
				return nil, true, inflightStatus(codes.ResourceExhausted, fmt.Sprintf("grpclimit: too many calls in flight for %q; retry after %v", name, inflightRetry), name)
			}
			return nil, true, inflightStatus(codes.Unavailable, fmt.Sprintf("grpclimit: the server has too many calls in flight (%q); retry after %v", name, inflightRetry), name)
		}
	}
	return release, held, nil
}

// inflightStatus is the error of a call refused by in-flight limit name.
func inflightStatus(code codes.Code, msg, name string) error {
	q := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "policy:" + name, Description: "too many in flight"}}}
	st, err := status.New(code, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(inflightRetry)}, q)
	if err != nil { // cannot happen: the details are valid messages
		return status.Error(code, msg)
	}
	return st.Err()
}
