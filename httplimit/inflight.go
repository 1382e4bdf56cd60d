// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
)

// InFlightLimit bounds how many requests are in flight at once, across
// every process sharing its store (see inflight.Limiter). It is checked
// after the rate limits have admitted a request (so a request it refuses
// has spent its rate-limit units, as one the handler refuses would), and
// its slot is held until the handler returns. Refusals count in
// Stats.Refused (429) or Stats.Unavailable (503), store errors in
// Stats.Errors.
type InFlightLimit struct {
	// InFlight is the limit, fixed or adaptive. Its name appears in the
	// RateLimit headers and must be printable ASCII.
	InFlight *inflight.Limiter
	// Key picks a per-client key: a request over such a limit gets 429.
	// When nil, every request of the route shares one limit, and a request
	// over it gets 503 (the server is busy, not the client too greedy).
	Key KeyFunc
}

// CriticalHeader is the request header that marks a request critical for
// the reserve of in-flight limits (inflight.WithReserve): "Sluice-Priority:
// critical". Behind a gateway, strip it from untrusted clients (sluice
// serve's gateway mode keeps it only from ClientIP.TrustsPeer peers).
const CriticalHeader = "Sluice-Priority"

// DefaultInFlightRetryAfter is the Retry-After of a request refused by an
// in-flight limit: slots free up when requests finish, typically well
// within a second.
const DefaultInFlightRetryAfter = time.Second

// InFlight adds in-flight limits to the requests that match pattern (a
// ServeMux pattern, as for Route), or to every request when pattern is
// "". A request faces the limits of "" and of the most specific pattern
// that matches it.
func InFlight(pattern string, limits ...InFlightLimit) Option {
	return func(c *config) error {
		for i, l := range limits {
			if l.InFlight == nil {
				return fmt.Errorf("httplimit: InFlight %q: limit %d: InFlight must be set", pattern, i)
			}
			if err := validName(l.InFlight.Name()); err != nil {
				return fmt.Errorf("httplimit: InFlight %q: limit %d: %w", pattern, i, err)
			}
		}
		c.inflight = append(c.inflight, inflightSpec{pattern, limits})
		return nil
	}
}

type inflightSpec struct {
	pattern string
	limits  []InFlightLimit
}

// inflightSet is the compiled in-flight limits of a Middleware.
type inflightSet struct {
	mux    *http.ServeMux
	global []InFlightLimit
}

type inflightRoute struct{ limits []InFlightLimit }

func (inflightRoute) ServeHTTP(http.ResponseWriter, *http.Request) {}

func compileInFlight(specs []inflightSpec) (*inflightSet, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	s := &inflightSet{}
	byPattern := map[string]*inflightRoute{}
	for _, sp := range specs {
		if sp.pattern == "" {
			s.global = append(s.global, sp.limits...)
			continue
		}
		if rt := byPattern[sp.pattern]; rt != nil {
			rt.limits = append(rt.limits, sp.limits...)
			continue
		}
		if s.mux == nil {
			s.mux = http.NewServeMux()
		}
		rt := &inflightRoute{limits: sp.limits}
		if err := register(s.mux, sp.pattern, rt); err != nil {
			return nil, err
		}
		byPattern[sp.pattern] = rt
	}
	return s, nil
}

// wrap returns next behind the in-flight limits.
func (s *inflightSet) wrap(m *Middleware, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var route []InFlightLimit
		if s.mux != nil {
			if h, _ := s.mux.Handler(r); h != nil {
				if rt, ok := h.(*inflightRoute); ok {
					route = rt.limits
				}
			}
		}
		if len(s.global) == 0 && len(route) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		m.serveInFlight(w, r, next, s.global, route)
	})
}

// serveInFlight takes a slot of each limit in turn (giving back those taken
// when one refuses), runs next, and releases them.
func (m *Middleware) serveInFlight(w http.ResponseWriter, r *http.Request, next http.Handler, lists ...[]InFlightLimit) {
	ctx := r.Context()
	critical := strings.EqualFold(r.Header.Get(CriticalHeader), "critical")
	var heldBuf [maxStack]*inflight.Holder
	held := heldBuf[:0]
	bg := context.WithoutCancel(ctx)
	releaseAll := func(dropped bool) {
		for _, h := range held {
			h.Release(bg, dropped)
		}
	}
	// cancelAll gives back the slots of a request refused before it ran:
	// no Controller learns from it (a sample of a few microseconds would
	// drag an adaptive limit down for everyone).
	cancelAll := func() {
		for _, h := range held {
			h.Cancel(bg)
		}
	}
	var policy, state []byte
	for _, list := range lists {
		for _, l := range list {
			key := ""
			if l.Key != nil {
				k, ok := l.Key(r)
				if !ok {
					continue
				}
				key = k
			} else {
				key = "*"
			}
			h, sl, err := l.InFlight.Acquire(ctx, key, critical)
			if h != nil && err != nil { // admitted failing open
				m.errs.Add(1)
				if m.onError != nil {
					m.onError(r, err)
				}
			}
			limit := l.InFlight.Limit()
			policy = appendSep(policy)
			policy = appendSFString(policy, l.InFlight.Name())
			policy = append(policy, ";q="...)
			policy = appendSFInt(policy, limit)
			policy = append(policy, `;qu="concurrent-requests"`...)
			state = appendSep(state)
			state = appendSFString(state, l.InFlight.Name())
			state = append(state, ";r="...)
			if h == nil {
				cancelAll()
				state = appendSFInt(state, 0)
				state = append(state, ";t="...)
				state = appendSFInt(state, ceilSeconds(DefaultInFlightRetryAfter))
				hd := w.Header()
				addHeader(hd, "Ratelimit-Policy", string(policy))
				addHeader(hd, "Ratelimit", string(state))
				hd["Retry-After"] = []string{strconv.FormatInt(ceilSeconds(DefaultInFlightRetryAfter), 10)}
				if err != nil && l.InFlight.FailureMode() == sluice.FailLocal {
					// The store failed and the local share is full: a
					// refusal like any other, below.
					m.errs.Add(1)
					if m.onError != nil {
						m.onError(r, err)
					}
				} else if err != nil {
					m.errs.Add(1)
					m.unavail.Add(1)
					if m.onError != nil {
						m.onError(r, err)
					}
					writeProblem(w, problem{Type: "about:blank", Title: "Service Unavailable", Status: http.StatusServiceUnavailable,
						Detail: "The in-flight limit " + strconv.Quote(l.InFlight.Name()) + " cannot decide (its store failed) and fails closed."})
					return
				}
				if l.Key != nil {
					m.refused.Add(1)
					writeProblem(w, problem{Type: ProblemQuotaExceeded, Title: "Quota Exceeded", Status: http.StatusTooManyRequests,
						Violated: []string{l.InFlight.Name()}, Detail: "Too many requests in flight for " + strconv.Quote(l.InFlight.Name()) + "; retry after 1 s."})
					return
				}
				m.unavail.Add(1)
				writeProblem(w, problem{Type: "about:blank", Title: "Service Unavailable", Status: http.StatusServiceUnavailable,
					Violated: []string{l.InFlight.Name()}, Detail: "The server has too many requests in flight (" + strconv.Quote(l.InFlight.Name()) + "); retry after 1 s."})
				return
			}
			state = appendSFInt(state, limit-sl.Held)
			held = append(held, h)
			if l.InFlight.TTL() > 0 {
				// Not ctx: the slot is held until the handler returns,
				// even after the client has gone.
				h.KeepAlive(bg)
			}
		}
	}
	if len(policy) > 0 {
		addHeader(w.Header(), "Ratelimit-Policy", string(policy))
		addHeader(w.Header(), "Ratelimit", string(state))
	}
	sw := &statusWriter{ResponseWriter: w}
	defer func() { releaseAll(sw.status >= 500) }()
	next.ServeHTTP(sw, r)
}

func appendSep(b []byte) []byte {
	if len(b) > 0 {
		b = append(b, ", "...)
	}
	return b
}

// addHeader appends v to the list in header k, as one comma-separated
// value (the RateLimit fields are lists).
func addHeader(h http.Header, k, v string) {
	if old := h[k]; len(old) > 0 && old[0] != "" {
		h[k] = []string{old[0] + ", " + v}
		return
	}
	h[k] = []string{v}
}

// statusWriter records the status a handler answers, for adaptive limits:
// a 5xx counts as a dropped request.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
