// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Limit is one limit a request is checked against: a Limiter (a named
// policy over a store, with its failure mode) and the key the request
// counts against. All the Limits of one request are checked in one
// sluice.AllowAll batch, so their Limiters must share one Store.
type Limit struct {
	// Limiter applies the policy. Its policy must have a Name of printable
	// ASCII: it names the policy in the response headers.
	Limiter *sluice.Limiter
	// Key picks the request's key; when it reports false the limit does not
	// apply to the request.
	Key KeyFunc
	// Shadow makes the limit decide and record but never refuse or delay a
	// request: one it would have refused is counted in Stats, reported to
	// OnShadowRefusal, and proceeds. A shadow limit consumes quota only
	// when the request is admitted, as it would if it were enforced, and
	// is not advertised in the response headers.
	Shadow bool
}

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
	// Refused counts requests answered 429.
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
	inflight    *inflightSet // nil: no in-flight limits

	admitted, refused, delayed, shadowRefused, errs, unavail atomic.Uint64
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
	policy sluice.Policy
	item   string // the RateLimit-Policy member
}

// routeHandler marks a route in the internal ServeMux.
type routeHandler struct{ rt *route }

func (routeHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

// New returns a Middleware. It fails, naming the culprit, on a bad route
// pattern (or two that conflict), a negative cost or one no limit could
// ever admit, a Limit without a Limiter or Key, a policy without a
// printable Name, or two limits of one route with the same policy name.
func New(opts ...Option) (*Middleware, error) {
	c := config{maxDelay: DefaultMaxDelay, unavailable: DefaultUnavailableRetryAfter}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	m := &Middleware{
		byPattern: map[string]*route{}, maxDelay: c.maxDelay, jitter: c.jitter,
		unavailable: c.unavailable, legacy: c.legacy, onShadow: c.onShadow, onError: c.onError,
	}
	if len(c.routes) > 0 {
		m.mux = http.NewServeMux()
	}
	inflight, err := compileInFlight(c.inflight)
	if err != nil {
		return nil, err
	}
	m.inflight = inflight
	for _, s := range c.routes {
		rt, err := compile(s, c.global)
		if err != nil {
			return nil, err
		}
		if err := register(m.mux, s.pattern, routeHandler{rt}); err != nil {
			return nil, err
		}
		m.byPattern[s.pattern] = rt
	}
	def := c.def
	if def == nil && len(c.global) > 0 {
		def = &routeSpec{"", 1, nil}
	}
	if def != nil {
		rt, err := compile(*def, c.global)
		if err != nil {
			return nil, err
		}
		m.def = rt
	}
	return m, nil
}

// register adds pattern to mux, turning ServeMux's panic on a bad or
// conflicting pattern into an error.
func register(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("httplimit: route %q: %v", pattern, p)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

func compile(s routeSpec, global []Limit) (*route, error) {
	name := "route " + strconv.Quote(s.pattern)
	if s.pattern == "" {
		name = "Default"
	}
	if s.cost < 0 {
		return nil, fmt.Errorf("httplimit: %s: cost %d: must be >= 0", name, s.cost)
	}
	rt := &route{pattern: s.pattern, cost: s.cost}
	all := append(append([]Limit(nil), global...), s.limits...)
	seen := map[string]bool{}
	for shadow := range 2 {
		for i, l := range all {
			if l.Shadow != (shadow == 1) {
				continue
			}
			if l.Limiter == nil || l.Key == nil {
				return nil, fmt.Errorf("httplimit: %s: limit %d: Limiter and Key must both be set", name, i)
			}
			p := l.Limiter.Policy()
			if err := validName(p.Name); err != nil {
				return nil, fmt.Errorf("httplimit: %s: limit %d: %w", name, i, err)
			}
			if seen[p.Name] {
				return nil, fmt.Errorf("httplimit: %s: policy name %q used by two limits", name, p.Name)
			}
			seen[p.Name] = true
			if capacity, _ := quota(p); s.cost > capacity {
				return nil, fmt.Errorf("httplimit: %s: cost %d exceeds the capacity %d of policy %q: no request could ever be admitted", name, s.cost, capacity, p.Name)
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
	}
	return rt, nil
}

// Stats returns the counts so far.
func (m *Middleware) Stats() Stats {
	return Stats{
		Admitted: m.admitted.Load(), Refused: m.refused.Load(), Delayed: m.delayed.Load(),
		ShadowRefused: m.shadowRefused.Load(), Errors: m.errs.Load(), Unavailable: m.unavail.Load(),
	}
}

// Handler returns next wrapped by the limits: m.Handler is a
// func(http.Handler) http.Handler, the usual shape of middleware.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if m.inflight != nil {
		next = m.inflight.wrap(m, next) // in-flight limits, after the rates admit
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt := m.match(r)
		if rt == nil || len(rt.limits) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		m.serve(w, r, rt, next)
	})
}

// match finds r's route with the internal ServeMux, so the result does not
// depend on whatever router the application uses. A request the ServeMux
// would redirect (to a cleaned path, or a trailing slash) counts under the
// route it is redirected to when that route is known.
func (m *Middleware) match(r *http.Request) *route {
	if m.mux != nil {
		h, pattern := m.mux.Handler(r)
		if rh, ok := h.(routeHandler); ok {
			return rh.rt
		}
		if rt, ok := m.byPattern[pattern]; ok && pattern != "" {
			return rt
		}
	}
	return m.def
}

// maxStack is how many limits per request fit the stack buffers.
const maxStack = 8

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, rt *route, next http.Handler) {
	var checkBuf [maxStack]sluice.Check
	var whichBuf [maxStack]int
	checks, which := checkBuf[:0], whichBuf[:0] // which[j]: index in rt.limits
	nEnf := 0
	for i := range rt.limits {
		l := &rt.limits[i]
		key, ok := l.Key(r)
		if !ok {
			continue
		}
		checks = append(checks, sluice.Check{Limiter: l.Limiter, Key: key, Cost: rt.cost, Peek: rt.cost == 0})
		which = append(which, i)
		if !l.Shadow {
			nEnf++
		}
	}
	if len(checks) == 0 {
		m.admitted.Add(1)
		next.ServeHTTP(w, r)
		return
	}
	ctx := r.Context()

	// A leaky-bucket request that would wait too long is refused before it
	// takes a place in the queue: peek at the queue's delay first.
	if rt.leaky {
		for j := range nEnf {
			l := &rt.limits[which[j]]
			if l.policy.Algorithm != sluice.LeakyBucket {
				continue
			}
			d, err := l.Limiter.AllowN(ctx, checks[j].Key, 0)
			if err == nil && d.Delay > m.maxDelay {
				d.Allowed, d.RetryAfter = false, d.Delay-m.maxDelay
				m.refuse(w, []outcome{{l, d}}, "")
				return
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
				m.shadowRefused.Add(1)
				if m.onShadow != nil {
					l := &rt.limits[which[j]]
					m.onShadow(r, ShadowRefusal{Route: rt.pattern, Policy: l.policy, Key: checks[j].Key, Decision: d})
				}
			}
		}
		if enforcedOK {
			// Only shadow limits refused: had they been enforced, nothing
			// would have been consumed; decide again without them.
			res, err = sluice.AllowAll(ctx, checks[:nEnf]...)
		}
	}
	if err != nil {
		m.failed(w, r, rt, which[:nEnf], checks[:nEnf], res.Decisions, err, next)
		return
	}

	var outBuf [maxStack]outcome
	outs := outBuf[:0]
	var delay time.Duration
	for j := range nEnf {
		d := res.Decisions[j]
		outs = append(outs, outcome{&rt.limits[which[j]], d})
		delay = max(delay, d.Delay)
	}
	policy := ""
	if nEnf == rt.nEnforced {
		policy = rt.policy
	}
	if !res.Allowed {
		m.refuse(w, outs, policy)
		return
	}
	writeHeaders(w.Header(), outs, policy, m.legacy)
	if delay > 0 {
		m.delayed.Add(1)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return // the client is gone
		}
	}
	m.admitted.Add(1)
	next.ServeHTTP(w, r)
}

// refuse answers 429 for outs, in which at least one decision is a
// refusal; policy is as for writeHeaders.
func (m *Middleware) refuse(w http.ResponseWriter, outs []outcome, policy string) {
	m.refused.Add(1)
	h := w.Header()
	writeHeaders(h, outs, policy, m.legacy)
	var violated []string
	var wait time.Duration
	impossible := false
	for _, o := range outs {
		if o.d.Allowed {
			continue
		}
		violated = append(violated, o.l.policy.Name)
		wait = max(wait, o.d.RetryAfter)
		impossible = impossible || o.d.Impossible
	}
	p := problem{Type: ProblemQuotaExceeded, Title: "Quota Exceeded", Status: http.StatusTooManyRequests, Violated: violated}
	if impossible {
		p.Detail = "The request costs more than the capacity of " + quoteList(violated) + "; retrying will not help."
	} else {
		if m.jitter > 0 {
			wait += rand.N(m.jitter)
		}
		secs := ceilSeconds(wait)
		h["Retry-After"] = []string{strconv.FormatInt(secs, 10)}
		p.Detail = "Quota exceeded for " + quoteList(violated) + "; retry after " + strconv.FormatInt(secs, 10) + " s."
	}
	writeProblem(w, p)
}

// failed handles a store error: answer 503 if an enforced limit fails
// closed, 429 if a limit that fails local refused (its local share is
// spent), else admit.
func (m *Middleware) failed(w http.ResponseWriter, r *http.Request, rt *route, which []int, checks []sluice.Check, decisions []sluice.Decision, err error, next http.Handler) {
	m.errs.Add(1)
	if m.onError != nil {
		m.onError(r, err)
	}
	var closed []string
	var local []outcome
	for j, c := range checks {
		switch c.Limiter.FailureMode() {
		case sluice.FailClosed:
			closed = append(closed, rt.limits[which[j]].policy.Name)
		case sluice.FailLocal:
			if j < len(decisions) && !decisions[j].Allowed {
				local = append(local, outcome{&rt.limits[which[j]], decisions[j]})
			}
		}
	}
	if len(closed) == 0 && len(local) > 0 {
		m.refuse(w, local, "")
		return
	}
	if len(closed) == 0 {
		m.admitted.Add(1)
		next.ServeHTTP(w, r)
		return
	}
	m.unavail.Add(1)
	w.Header()["Retry-After"] = []string{strconv.FormatInt(max(ceilSeconds(m.unavailable), 1), 10)}
	writeProblem(w, problem{
		Type: "about:blank", Title: "Service Unavailable", Status: http.StatusServiceUnavailable,
		Detail: "The rate limiter cannot decide (its store failed) and " + quoteList(closed) + " fail closed.",
	})
}
