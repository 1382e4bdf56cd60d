// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/decide"
	"github.com/sluicehq/sluice/internal/muxcheck"
)

// Limit is one limit a request is checked against: a Limiter (a named
// policy over a store, with its failure mode) and the key the request
// counts against. All the Limits of one request are checked in one
// sluice.AllowAll batch, so their Limiters must share one Store.
type Limit struct {
	// Limiter applies the policy. Its policy must have a Name of printable
	// ASCII: it names the policy in the response headers.
	Limiter *sluice.Limiter
	// Key picks the request's key; when it reports none, Missing decides.
	Key KeyFunc
	// Shadow makes the limit decide and record but never refuse or delay a
	// request: one it would have refused is counted in Stats, reported to
	// OnShadowRefusal, and proceeds. A shadow limit consumes quota only
	// when the request is admitted, as it would if it were enforced, and
	// is not advertised in the response headers.
	Shadow bool
	// Name, when set, names the limit in the response headers instead of
	// its policy's Name (which the store keeps its state under); printable
	// ASCII.
	Name string
	// Missing says what the limit does with a request Key reports no key
	// for. The zero value, MissingShared, counts all such requests under
	// one shared key: a request without the API key header is limited,
	// never let through unlimited.
	Missing Missing
}

// Missing says what a Limit does with a request its Key reports no key for
// (no API key header, say). Under MissingShared, the zero value, every such
// request counts under one key shared by all of them (the empty key, which
// no key function of this package returns): they are limited together,
// never let through unlimited. Under MissingRefused such a request is
// answered 400 Bad Request; under MissingSkipped the limit does not apply to it (choose
// it only where another limit covers those requests).
type Missing = decide.Missing

// The values of Missing.
const (
	MissingShared  = decide.Share
	MissingRefused = decide.Reject
	MissingSkipped = decide.Skip
)

// ShadowRefusal describes a request a shadow limit would have refused.
type ShadowRefusal struct {
	// Route is the pattern of the request's route ("" for Default).
	Route string
	// Policy is the shadow limit's policy.
	Policy sluice.Policy
	// Key is the key the request counted against.
	Key string
	// Decision is the refusal that was not enforced.
	Decision sluice.Decision
}

// Stats counts what a Middleware did. All counts are since New.
type Stats struct {
	// Admitted counts requests passed to the handler, including those
	// admitted because the store failed open.
	Admitted uint64
	// Refused counts requests a limit refused: answered 429, or 503 by a
	// route-wide in-flight limit (the server is busy).
	Refused uint64
	// Delayed counts admitted requests held for a leaky-bucket delay.
	Delayed uint64
	// ShadowRefused counts the refusals of shadow limits that were not
	// enforced (one request may count once per shadow limit).
	ShadowRefused uint64
	// Errors counts requests the store could not decide.
	Errors uint64
	// Unavailable counts requests answered 503 because the store failed
	// and a limit fails closed.
	Unavailable uint64
	// Gone counts requests whose client went away (the request's context
	// ended) before they were decided or while they were held: never
	// passed to the handler, and not store errors.
	Gone uint64
	// Malformed counts requests answered 400 because a MissingRefused
	// limit had no key for them.
	Malformed uint64
}

// Middleware rate-limits the requests of an http.Handler. It is safe for
// concurrent use.
type Middleware struct {
	mux         *http.ServeMux
	byPattern   map[string]*route
	def         *route
	maxDelay    time.Duration
	jitter      time.Duration
	unavailable time.Duration
	legacy      bool
	onShadow    func(*http.Request, ShadowRefusal)
	onError     func(*http.Request, error)
	critical    func(*http.Request) bool // WithCriticalFunc; nil: none
	inflight    *inflightSet             // nil: no in-flight limits

	counts decide.Counts
}

// route is a compiled route: its limits, enforced ones first.
type route struct {
	pattern   string
	cost      int64
	limits    []limit
	nEnforced int
	leaky     bool   // an enforced limit is leaky-bucket
	policy    string // RateLimit-Policy when every enforced limit applies
}

type limit struct {
	Limit
	// policy is the Limiter's policy as the headers present it: named
	// Limit.Name if set, and for an enforced leaky-bucket one with the
	// Burst that fits within the maximum delay (decide.Capacity).
	policy sluice.Policy
	item   string // the RateLimit-Policy member
}

// routeMark is the handler of every pattern of the internal ServeMuxes:
// they only match (see lookup), and byPattern maps a pattern to its route.
type routeMark struct{}

func (routeMark) ServeHTTP(http.ResponseWriter, *http.Request) {}

// New returns a Middleware. It fails, naming the culprit, on a bad route
// pattern (or two that conflict), a negative cost or one no limit could
// ever admit, a Limit without a Limiter or Key, a policy without a
// printable Name, two limits of one route with the same policy name, or
// an enforced leaky-bucket Limiter whose policy has no Name (Limit.Name
// does not name its state: see WithMaxDelay).
func New(opts ...Option) (*Middleware, error) {
	c := config{maxDelay: DefaultMaxDelay, unavailable: DefaultUnavailableRetryAfter}
	for _, o := range opts {
		if o == nil {
			continue // a nil option is no option
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	m := &Middleware{
		byPattern: map[string]*route{}, maxDelay: c.maxDelay, jitter: c.jitter,
		unavailable: c.unavailable, legacy: c.legacy, onShadow: c.onShadow, onError: c.onError,
		critical: c.critical,
	}
	if len(c.routes) > 0 {
		m.mux = http.NewServeMux()
	}
	inflight, err := compileInFlight(c.inflight)
	if err != nil {
		return nil, err
	}
	m.inflight = inflight
	if len(c.global) > 0 {
		// The Global limits alone first, so that a mistake in one is blamed
		// on Global rather than on a route. Without Default, the requests no
		// Route matches face them alone, at cost 1.
		rt, err := compile("", routeSpec{cost: 1}, c.global, c.maxDelay)
		if err != nil {
			return nil, err
		}
		m.def = rt
	}
	routes := patterns{mux: m.mux, option: "Route"}
	for _, s := range c.routes {
		rt, err := compile("route "+strconv.Quote(s.pattern), s, c.global, c.maxDelay)
		if err != nil {
			return nil, err
		}
		if err := routes.add(s.pattern, s.at); err != nil {
			return nil, err
		}
		m.byPattern[s.pattern] = rt
	}
	if c.def != nil {
		rt, err := compile("Default", *c.def, c.global, c.maxDelay)
		if err != nil {
			return nil, err
		}
		m.def = rt
	}
	return m, nil
}

// patterns registers the patterns of one option (Route, InFlight) in mux
// (with routeMark). A pattern ServeMux refuses is an error that names it
// and the pattern it conflicts with, and where the user gave them
// (ServeMux would name this package's own source).
type patterns struct {
	mux    *http.ServeMux
	option string
	given  []string // the patterns registered so far
	at     []string // where each was given
}

// add registers pattern, given at at (caller's "file:line", or "").
func (p *patterns) add(pattern, at string) error {
	r, ok := muxcheck.Add(p.mux, routeMark{}, pattern, p.given)
	if ok {
		p.given, p.at = append(p.given, pattern), append(p.at, at)
		return nil
	}
	this := p.describe(pattern, at)
	if r.Conflict < 0 {
		return fmt.Errorf("httplimit: %s: %s", this, r.Why)
	}
	return fmt.Errorf("httplimit: %s conflicts with %s: %s", this, p.describe(p.given[r.Conflict], p.at[r.Conflict]), r.Why)
}

// describe names a pattern as the user gave it: `Route "GET /a" (at
// main.go:31)`.
func (p *patterns) describe(pattern, at string) string {
	s := p.option + " " + strconv.Quote(pattern)
	if at != "" {
		s += " (at " + at + ")"
	}
	return s
}

// compile compiles the limits of s (and the Global ones), named name in
// errors ("" for the Global limits alone), for a front end that holds
// leaky-bucket requests at most maxDelay.
func compile(name string, s routeSpec, global []Limit, maxDelay time.Duration) (*route, error) {
	all := append(append([]Limit(nil), global...), s.limits...)
	specs := make([]decide.Spec, len(all))
	for i, l := range all {
		specs[i] = decide.Spec{Limiter: l.Limiter, Keyed: l.Key != nil, NoKey: noKey(l.Key), Shadow: l.Shadow}
	}
	order, _, err := decide.Order(name, s.cost, len(global), specs)
	if err != nil {
		return nil, fmt.Errorf("httplimit: %w", err)
	}
	rt := &route{pattern: s.pattern, cost: s.cost}
	for _, i := range order {
		l := all[i]
		p := l.Limiter.Policy()
		if l.Name != "" {
			p.Name = l.Name
		}
		if err := validName(p.Name); err != nil {
			where := decide.Name(i, len(global))
			if name != "" {
				where = name + ": " + where
			}
			return nil, fmt.Errorf("httplimit: %s: %w", where, err)
		}
		if !l.Shadow && p.Algorithm == sluice.LeakyBucket {
			// Its capacity is what an idle key admits within maxDelay.
			p.Burst = decide.Capacity(p, maxDelay)
		}
		rt.limits = append(rt.limits, limit{Limit: l, policy: p, item: policyItem(p)})
		if !l.Shadow {
			if rt.nEnforced > 0 {
				rt.policy += ", "
			}
			rt.policy += policyItem(p)
			rt.nEnforced++
			rt.leaky = rt.leaky || p.Algorithm == sluice.LeakyBucket
		}
	}
	return rt, nil
}

// Stats returns the counts so far.
func (m *Middleware) Stats() Stats {
	c := &m.counts
	return Stats{
		Admitted: c.Admitted.Load(), Refused: c.Refused.Load(), Delayed: c.Delayed.Load(),
		ShadowRefused: c.ShadowRefused.Load(), Errors: c.Errors.Load(), Unavailable: c.Unavailable.Load(),
		Gone: c.Gone.Load(), Malformed: c.Malformed.Load(),
	}
}

// Handler returns next wrapped by the limits: m.Handler is a
// func(http.Handler) http.Handler, the usual shape of middleware.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rated, failed := false, false
		if rt := m.match(r); rt != nil && len(rt.limits) > 0 {
			var admitted bool
			if admitted, failed = m.serve(w, r, rt); !admitted {
				return // answered
			}
			rated = true
		}
		if m.inflight != nil {
			m.inflight.serve(m, w, r, next, rated, failed) // after the rates admit
			return
		}
		if rated {
			m.counts.Passed()
		}
		next.ServeHTTP(w, r)
	})
}

// match finds r's route with the internal ServeMux, so the result does not
// depend on whatever router the application uses (see lookup).
func (m *Middleware) match(r *http.Request) *route {
	if rt, ok := lookup(m.mux, m.byPattern, r); ok {
		return rt
	}
	return m.def
}

// lookup returns what byPattern holds for the pattern of mux that r
// matches, mux being nil or holding exactly the patterns of byPattern. A
// request the ServeMux would redirect (to a cleaned path, or a trailing
// slash) gets the route it is redirected to: mux.Handler returns that
// route's pattern with the redirect. Both the rate limits and the in-flight
// limits find their route here, so a path cannot skip one and meet the
// other.
func lookup[V any](mux *http.ServeMux, byPattern map[string]V, r *http.Request) (v V, ok bool) {
	if mux == nil {
		return v, false
	}
	if _, pattern := mux.Handler(r); pattern != "" {
		v, ok = byPattern[pattern]
	}
	return v, ok
}

// maxStack is how many limits per request fit the stack buffers.
const maxStack = 8

// serve decides r with the decision core: admitted when the rate limits
// admit it (their headers written), else the answer is rendered; failed
// says the store failed on it (and is counted in Stats.Errors).
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, rt *route) (admitted, failed bool) {
	var checkBuf [maxStack]sluice.Check
	var whichBuf [maxStack]int
	checks, which := checkBuf[:0], whichBuf[:0] // which[j]: index in rt.limits
	nEnf := 0
	for i := range rt.limits {
		l := &rt.limits[i]
		key, ok := l.Key(r)
		key, use, reject := decide.KeyOf(key, ok, l.Missing)
		if reject {
			m.missingKey(w, "policy "+strconv.Quote(l.policy.Name))
			return false, false
		}
		if !use {
			continue
		}
		checks = append(checks, sluice.Check{Limiter: l.Limiter, Key: key, Cost: rt.cost, Peek: rt.cost == 0})
		which = append(which, i)
		if !l.Shadow {
			nEnf++
		}
	}
	v := decide.Decide(r.Context(), decide.Request{Checks: checks, Enforced: nEnf, MaxDelay: m.maxDelay, Leaky: rt.leaky, Jitter: m.jitter})
	m.counts.Verdict(&v)
	for j, d := range v.Shadow {
		if !d.Allowed && m.onShadow != nil {
			m.onShadow(r, ShadowRefusal{Route: rt.pattern, Policy: rt.limits[which[nEnf+j]].policy, Key: checks[nEnf+j].Key, Decision: d})
		}
	}
	if v.StoreFailed() && m.onError != nil {
		m.onError(r, v.Err)
	}
	// The outcomes to render: every enforced decision, or when the failure
	// modes decided, only the refusals (the others say nothing true).
	var outBuf [maxStack]outcome
	outs := outBuf[:0]
	for k, d := range v.Decisions {
		if !v.StoreFailed() || v.Violated(checks, k) {
			outs = append(outs, outcome{&rt.limits[which[v.Offset+k]], d})
		}
	}
	policy := ""
	if len(outs) == rt.nEnforced {
		policy = rt.policy
	}
	switch v.Outcome {
	case decide.Unavailable:
		m.unavailable503(w, outs)
	case decide.Refuse:
		m.refuse(w, outs, policy, v.Wait, v.Impossible)
	case decide.Gone:
		gone(w, v.Err)
	case decide.Admit:
		writeHeaders(w.Header(), outs, policy, m.legacy)
		return true, v.StoreFailed()
	}
	return false, v.StoreFailed()
}

// gone answers a request whose context ended (err) before it was let
// through: 503, which a client that closed its connection never reads and
// one whose deadline passed on the server's side does (net/http would
// otherwise send 200 with no body).
func gone(w http.ResponseWriter, err error) {
	writeProblem(w, problem{Type: "about:blank", Title: "Service Unavailable", Status: http.StatusServiceUnavailable,
		Detail: "The request ended before the rate limiter let it through: " + err.Error() + "."})
}

// refuse answers 429 for outs, in which at least one decision is a
// refusal; policy is as for writeHeaders, wait the verdict's wait (the
// longest of the refusals, with jitter), and impossible says no wait can
// cure one of them.
func (m *Middleware) refuse(w http.ResponseWriter, outs []outcome, policy string, wait time.Duration, impossible bool) {
	h := w.Header()
	writeHeaders(h, outs, policy, m.legacy)
	var violated []string
	for _, o := range outs {
		if !o.d.Allowed {
			violated = append(violated, o.l.policy.Name)
		}
	}
	p := problem{Type: ProblemQuotaExceeded, Title: "Quota Exceeded", Status: http.StatusTooManyRequests, Violated: violated}
	if impossible {
		p.Detail = "The request costs more than the capacity of " + quoteList(violated) + "; retrying will not help."
	} else {
		secs := ceilSeconds(wait)
		h["Retry-After"] = []string{strconv.FormatInt(secs, 10)}
		p.Detail = "Quota exceeded for " + quoteList(violated) + "; retry after " + strconv.FormatInt(secs, 10) + " s."
	}
	writeProblem(w, p)
}

// unavailable503 answers 503: the store failed and the limits of outs
// fail closed.
func (m *Middleware) unavailable503(w http.ResponseWriter, outs []outcome) {
	var closed []string
	for _, o := range outs {
		closed = append(closed, o.l.policy.Name)
	}
	detail := "The rate limiter cannot decide (its store failed)."
	if len(closed) > 0 {
		detail = "The rate limiter cannot decide (its store failed) and " + quoteList(closed) + " fail closed."
	}
	w.Header()["Retry-After"] = []string{strconv.FormatInt(max(ceilSeconds(m.unavailable), 1), 10)}
	writeProblem(w, problem{Type: "about:blank", Title: "Service Unavailable", Status: http.StatusServiceUnavailable, Detail: detail})
}

// missingKey answers 400: a MissingRefused limit, named by what, has no key
// for the request.
func (m *Middleware) missingKey(w http.ResponseWriter, what string) {
	m.counts.NoKey()
	writeProblem(w, problem{Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest,
		Detail: "The request carries no key for " + what + "."})
}
