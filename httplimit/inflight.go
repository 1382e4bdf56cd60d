// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/internal/decide"
)

// InFlightLimit bounds how many requests are in flight at once, across
// every process sharing its store (see inflight.Limiter). It is checked
// after the rate limits have admitted a request (so a request it refuses
// has spent its rate-limit units, as one the handler refuses would), and
// its slot is held until the handler returns. Refusals count in
// Stats.Refused (429, or 503 for a route-wide limit), store failures in
// Stats.Errors (and Stats.Unavailable when the limit fails closed).
type InFlightLimit struct {
	// InFlight is the limit, fixed or adaptive. Its name appears in the
	// RateLimit headers and must be printable ASCII.
	InFlight *inflight.Limiter
	// Key picks a per-client key: a request over such a limit gets 429.
	// When nil, every request of the route shares one limit, and a request
	// over it gets 503 (the server is busy, not the client too greedy).
	Key KeyFunc
	// Missing says what the limit does with a request Key reports no key
	// for, as for Limit: by default such requests share one key.
	Missing Missing
}

// CriticalHeader is the request header CriticalFrom reads: "Sluice-Priority:
// critical" asks for the reserve of in-flight limits (inflight.WithReserve).
// The header alone grants nothing: only WithCriticalFunc does.
const CriticalHeader = "Sluice-Priority"

// CriticalFrom returns a function for WithCriticalFunc: a request is
// critical when it carries "Sluice-Priority: critical" and trusted(r)
// reports true, for instance when its peer is a proxy that sets the header
// itself (clientip.Resolver.TrustsPeer). A nil trusted trusts nobody.
func CriticalFrom(trusted func(r *http.Request) bool) func(r *http.Request) bool {
	return func(r *http.Request) bool {
		vals := r.Header[CriticalHeader]
		return len(vals) > 0 && strings.EqualFold(strings.TrimSpace(vals[0]), "critical") && trusted != nil && trusted(r)
	}
}

// DefaultInFlightRetryAfter is the Retry-After of a request refused by an
// in-flight limit: slots free up when requests finish, typically well
// within a second.
const DefaultInFlightRetryAfter = time.Second

// InFlight adds in-flight limits to the requests that match pattern (a
// ServeMux pattern, as for Route), or to every request when pattern is
// "". A request faces the limits of "" and of the most specific pattern
// that matches it; one that ServeMux would redirect to a cleaned path
// faces those of the route it is redirected to, as for Route.
func InFlight(pattern string, limits ...InFlightLimit) Option {
	at := caller()
	return func(c *config) error {
		for i, l := range limits {
			if l.InFlight == nil {
				return fmt.Errorf("httplimit: InFlight %q: limit %d: InFlight must be set", pattern, i)
			}
			if err := validName(l.InFlight.Name()); err != nil {
				return fmt.Errorf("httplimit: InFlight %q: limit %d: %w", pattern, i, err)
			}
			if why := noKey(l.Key); why != "" {
				return fmt.Errorf("httplimit: InFlight %q: limit %d: Key %s", pattern, i, why)
			}
		}
		c.inflight = append(c.inflight, inflightSpec{pattern, limits, at})
		return nil
	}
}

type inflightSpec struct {
	pattern string
	limits  []InFlightLimit
	at      string // where InFlight was called (caller)
}

// inflightSet is the compiled in-flight limits of a Middleware.
type inflightSet struct {
	mux       *http.ServeMux            // nil: no routes
	byPattern map[string]*inflightRoute // the routes of mux
	global    []InFlightLimit
}

type inflightRoute struct{ limits []InFlightLimit }

func compileInFlight(specs []inflightSpec) (*inflightSet, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	s := &inflightSet{byPattern: map[string]*inflightRoute{}}
	var given patterns
	for _, sp := range specs {
		if sp.pattern == "" {
			s.global = append(s.global, sp.limits...)
			continue
		}
		if rt := s.byPattern[sp.pattern]; rt != nil {
			rt.limits = append(rt.limits, sp.limits...)
			continue
		}
		if s.mux == nil {
			s.mux = http.NewServeMux()
			given = patterns{mux: s.mux, option: "InFlight"}
		}
		rt := &inflightRoute{limits: sp.limits}
		if err := given.add(sp.pattern, sp.at); err != nil {
			return nil, err
		}
		s.byPattern[sp.pattern] = rt
	}
	return s, nil
}

// serve runs next behind the in-flight limits of r; rated says the rate
// limits decided r (and admitted it), failed that the store failed on them
// (a request counts once in Stats.Errors). r's route is found as for the
// rate limits (lookup): a path the ServeMux would redirect meets the limits
// of the route it is redirected to.
func (s *inflightSet) serve(m *Middleware, w http.ResponseWriter, r *http.Request, next http.Handler, rated, failed bool) {
	var route []InFlightLimit
	if rt, ok := lookup(s.mux, s.byPattern, r); ok {
		route = rt.limits
	}
	if len(s.global) == 0 && len(route) == 0 {
		if rated {
			m.counts.Passed()
		}
		next.ServeHTTP(w, r)
		return
	}
	m.serveInFlight(w, r, next, rated, failed, s.global, route)
}

// serveInFlight takes a slot of each limit in turn (giving back those taken
// when one refuses), runs next, and releases them.
func (m *Middleware) serveInFlight(w http.ResponseWriter, r *http.Request, next http.Handler, rated, failed bool, lists ...[]InFlightLimit) {
	ctx := r.Context()
	critical := m.critical != nil && m.critical(r)
	var slots decide.Slots
	var policy, state []byte
	for _, list := range lists {
		for _, l := range list {
			key := "*"
			if l.Key != nil {
				k, ok := l.Key(r)
				k, use, reject := decide.KeyOf(k, ok, l.Missing)
				if reject {
					slots.Cancel(ctx)
					m.missingKey(w, "the in-flight limit "+strconv.Quote(l.InFlight.Name()))
					return
				}
				if !use {
					continue
				}
				key = k
			}
			t := slots.Take(ctx, l.InFlight, key, critical)
			failed = m.counts.Taken(t, failed)
			if t.StoreFailed() && m.onError != nil {
				m.onError(r, t.Err)
			}
			if t.Outcome == decide.Gone {
				gone(w, t.Err)
				return
			}
			name := l.InFlight.Name()
			policy = appendSep(policy)
			policy = appendSFString(policy, name)
			policy = append(policy, ";q="...)
			policy = appendSFInt(policy, t.Limit)
			policy = append(policy, `;qu="concurrent-requests"`...)
			state = appendSep(state)
			state = appendSFString(state, name)
			state = append(state, ";r="...)
			if t.Outcome == decide.Admit {
				state = appendSFInt(state, t.Free)
				continue
			}
			secs := ceilSeconds(DefaultInFlightRetryAfter)
			state = appendSFInt(state, 0)
			state = append(state, ";t="...)
			state = appendSFInt(state, secs)
			hd := w.Header()
			if old := hd["Ratelimit"]; len(old) > 0 {
				// The rate limits admitted: on a refusal their resets,
				// which may come after Retry-After, are left out.
				hd["Ratelimit"] = []string{withoutResets(old[0])}
			}
			addHeader(hd, "Ratelimit-Policy", string(policy))
			addHeader(hd, "Ratelimit", string(state))
			hd["Retry-After"] = []string{strconv.FormatInt(secs, 10)}
			switch {
			case t.Outcome == decide.Unavailable:
				writeProblem(w, problem{Type: "about:blank", Title: "Service Unavailable", Status: http.StatusServiceUnavailable,
					Detail: "The in-flight limit " + strconv.Quote(name) + " cannot decide: " + t.Cause() + "."})
			case l.Key != nil:
				writeProblem(w, problem{Type: ProblemQuotaExceeded, Title: "Quota Exceeded", Status: http.StatusTooManyRequests,
					Violated: []string{name}, Detail: "Too many requests in flight for " + strconv.Quote(name) + "; retry after 1 s."})
			default:
				writeProblem(w, problem{Type: "about:blank", Title: "Service Unavailable", Status: http.StatusServiceUnavailable,
					Violated: []string{name}, Detail: "The server has too many requests in flight (" + strconv.Quote(name) + "); retry after 1 s."})
			}
			return
		}
	}
	if len(policy) > 0 {
		addHeader(w.Header(), "Ratelimit-Policy", string(policy))
		addHeader(w.Header(), "Ratelimit", string(state))
	}
	if rated || len(policy) > 0 {
		m.counts.Passed()
	}
	sw := &statusWriter{ResponseWriter: w}
	defer func() { slots.Release(ctx, sw.status >= 500) }()
	next.ServeHTTP(sw.wrap(), r)
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
// a 5xx counts as a dropped request. The handler gets it through wrap,
// which keeps the optional interfaces of the writer it wraps.
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

// wrap returns w as the handler sees it: an http.Flusher iff the
// underlying writer is one, and an http.Hijacker iff it is one, so that a
// streaming handler (w.(http.Flusher)) or a WebSocket upgrade
// (w.(http.Hijacker)) works behind the limits as without them, and none is
// told of an interface the server's writer lacks.
func (w *statusWriter) wrap() http.ResponseWriter {
	_, fl := w.ResponseWriter.(http.Flusher)
	_, hj := w.ResponseWriter.(http.Hijacker)
	switch {
	case fl && hj:
		return flushHijacker{w}
	case fl:
		return flusher{w}
	case hj:
		return hijacker{w}
	}
	return w
}

// flush sends what is buffered; a response flushed before WriteHeader is a
// 200. The writer must be an http.Flusher.
func (w *statusWriter) flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.ResponseWriter.(http.Flusher).Flush()
}

// hijack hands the connection to the handler: what it then writes is not
// seen, so a hijacked request never counts as dropped. The writer must be
// an http.Hijacker.
func (w *statusWriter) hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

// flusher is a statusWriter whose writer is an http.Flusher.
type flusher struct{ *statusWriter }

func (w flusher) Flush() { w.flush() }

// hijacker is a statusWriter whose writer is an http.Hijacker.
type hijacker struct{ *statusWriter }

func (w hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }

// flushHijacker is a statusWriter whose writer is both.
type flushHijacker struct{ *statusWriter }

func (w flushHijacker) Flush()                                       { w.flush() }
func (w flushHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }
