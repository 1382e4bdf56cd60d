// SPDX-License-Identifier: Apache-2.0

package pace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ErrDeadline is wrapped by the error RoundTrip returns, without sending
// the request, when the wait the rate limit needs would end after the
// request context's deadline.
var ErrDeadline = errors.New("pace: the rate limit wait would pass the request's deadline")

// Transport is an http.RoundTripper that delays requests so that they are
// not refused by the server's rate limit (see the package documentation for
// the exact guarantee). Create it with New (the zero Transport is usable
// too, and sends through http.DefaultTransport); it is safe for concurrent
// use, and one Transport should serve all the goroutines of one client.
type Transport struct {
	base  http.RoundTripper
	mu    sync.Mutex
	hosts map[string]*host
	tick  uint64 // counts uses, to find the least recently used
}

// The bounds of what a Transport remembers, whatever its servers send.
const (
	// MaxPolicies is the most policies a Transport remembers per host. A
	// server that names more loses the state of the least recently named
	// ones: their next request goes as if nothing were known of them.
	MaxPolicies = 64
	// MaxHosts is the most hosts a Transport remembers while none of their
	// requests is under way; past it the least recently used idle host is
	// forgotten.
	MaxHosts = 1024
)

// New returns a Transport that sends requests through base
// (http.DefaultTransport when nil).
func New(base http.RoundTripper) *Transport {
	return &Transport{base: base, hosts: map[string]*host{}}
}

// host is what the responses of one host said.
type host struct {
	seen     bool // a response has come back
	pols     map[string]*policy
	blocked  time.Time // no request before (Retry-After)
	inflight int64
	news     chan struct{} // closed, and replaced, on every response
	users    int           // RoundTrips holding this host
	used     uint64        // Transport.tick of its last use
	tick     uint64        // counts responses, to find the least recently named policy
}

// policy is what the responses said of one named policy.
type policy struct {
	used  uint64    // host.tick of the last response that named it
	r     int64     // units left, as of the last report
	reset time.Time // when the key is idle again
	// exact reports whether reset came from a t parameter of an admitted
	// request, so that q is available after it. Otherwise (a refusal, or
	// no t) the state after reset is unknown and one request probes it.
	exact bool
	q     int64 // capacity, from RateLimit-Policy; 0 when unknown
	// conc: an in-flight limit (qu="concurrent-requests"): q bounds the
	// requests in flight, and r and t are not units and resets.
	conc bool
}

// RoundTrip waits until the request can be sent without being refused (or
// its context ends, or the wait would pass its deadline), sends it through
// the base transport, and learns from the response's headers.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	h := t.host(req.URL.Host)
	ctx := req.Context()
	for {
		t.mu.Lock()
		now := time.Now()
		ok, until := h.ready(now)
		if ok {
			h.inflight++
			t.mu.Unlock()
			break
		}
		news := h.news
		t.mu.Unlock()
		if err := wait(ctx, now, until, news); err != nil {
			t.mu.Lock()
			h.users--
			t.mu.Unlock()
			closeBody(req)
			return nil, fmt.Errorf("pace: %s %s: %w", req.Method, req.URL.Redacted(), err)
		}
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	t.mu.Lock()
	defer t.mu.Unlock()
	h.users--
	h.inflight--
	if err == nil {
		h.learn(resp, time.Now())
	}
	close(h.news)
	h.news = make(chan struct{})
	return resp, err
}

// wait blocks until until (when not zero), news is closed or ctx ends. It
// returns at once, with an error wrapping ErrDeadline, when until is not
// before ctx's deadline (the request would have no time left to be sent).
func wait(ctx context.Context, now, until time.Time, news <-chan struct{}) error {
	var timer <-chan time.Time
	if !until.IsZero() {
		if d, ok := ctx.Deadline(); ok && !until.Before(d) {
			return fmt.Errorf("waiting %v: %w", until.Sub(now), ErrDeadline)
		}
		tm := time.NewTimer(until.Sub(now))
		defer tm.Stop()
		timer = tm.C
	}
	select {
	case <-timer:
		return nil
	case <-news:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeBody closes a request body that will not be sent, as RoundTrip must.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// host returns the state of host name, held by the caller until it gives
// it up (users--). A new host past MaxHosts forgets the least recently
// used host that no request holds.
func (t *Transport) host(name string) *host {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tick++
	h := t.hosts[name]
	if h == nil {
		if t.hosts == nil {
			t.hosts = map[string]*host{}
		}
		if len(t.hosts) >= MaxHosts {
			t.forgetIdleHost()
		}
		h = &host{pols: map[string]*policy{}, news: make(chan struct{})}
		t.hosts[name] = h
	}
	h.users++
	h.used = t.tick
	return h
}

// forgetIdleHost forgets the least recently used host no request holds, if
// any.
func (t *Transport) forgetIdleHost() {
	var oldest string
	var at uint64
	for name, h := range t.hosts {
		if h.users == 0 && (oldest == "" || h.used < at) {
			oldest, at = name, h.used
		}
	}
	if oldest != "" {
		delete(t.hosts, oldest)
	}
}

// ready reports whether a request can be sent at now. If not, until is the
// instant at which it may be (zero when only a response in flight can
// tell).
func (h *host) ready(now time.Time) (ok bool, until time.Time) {
	if now.Before(h.blocked) {
		return false, h.blocked
	}
	if !h.seen {
		// Nothing known yet: one request at a time.
		return h.inflight == 0, time.Time{}
	}
	ok = true
	for _, p := range h.pols {
		switch {
		case p.conc:
			if p.q > 0 && h.inflight >= p.q {
				ok = false // a response in flight frees a slot
			}
		case now.Before(p.reset):
			if p.r-h.inflight >= 1 {
				continue
			}
			ok = false
			if p.r < 1 { // only time helps
				until = later(until, p.reset)
			}
		case p.exact && p.q > 0:
			if p.q-h.inflight < 1 {
				ok = false
			}
		default: // past a reset whose aftermath is unknown: probe
			if h.inflight > 0 {
				ok = false
			}
		}
	}
	if ok {
		return true, time.Time{}
	}
	// With requests in flight a response may bring news sooner: the
	// caller waits for that too. With none, until is set: every case
	// above that refuses with nothing in flight sets it.
	return false, until
}

// later returns the later of a and b, a zero Time counting as the earliest.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// learn updates h from a response received at now.
func (h *host) learn(resp *http.Response, now time.Time) {
	h.seen = true
	h.tick++
	caps := map[string]int64{}
	var conc map[string]bool
	for _, it := range parseList(resp.Header, "RateLimit-Policy") {
		if q, ok := it.params["q"]; ok {
			caps[it.name] = q
		}
		if it.conc {
			if conc == nil {
				conc = map[string]bool{}
			}
			conc[it.name] = true
		}
	}
	refused := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
	ra, hasRA := retryAfter(resp.Header, now)
	if refused && hasRA {
		h.blocked = later(h.blocked, now.Add(ra))
	}
	for _, it := range parseList(resp.Header, "RateLimit") {
		p := h.pols[it.name]
		if p == nil {
			if len(h.pols) >= MaxPolicies {
				h.forgetPolicy()
			}
			p = &policy{}
			h.pols[it.name] = p
		}
		p.used = h.tick
		if q, ok := caps[it.name]; ok {
			p.q = q
		}
		if p.conc = conc[it.name]; p.conc {
			continue // slots, not units: ready counts requests in flight
		}
		r, hasR := it.params["r"]
		t, hasT := it.params["t"]
		if refused {
			// t is the wait of the refused request, not a reset: after
			// it, only a probe can tell.
			if hasT || !hasR || r < 1 {
				p.r, p.exact = 0, false
				p.reset = later(p.reset, now.Add(max(seconds(t), ra)))
			}
			continue
		}
		if !hasR {
			continue
		}
		reset := now
		if hasT {
			reset = now.Add(seconds(t))
		}
		if !now.Before(p.reset) {
			// The old report has expired: this one is the state.
			p.r, p.reset, p.exact = r, reset, hasT
			continue
		}
		// Reports of requests decided in another order than they
		// arrive: keep the least left and the latest reset.
		p.r = min(p.r, r)
		p.reset = later(p.reset, reset)
		p.exact = p.exact && hasT
	}
}

// forgetPolicy forgets the policy the responses named least recently.
func (h *host) forgetPolicy() {
	var oldest string
	var at uint64
	first := true
	for name, p := range h.pols {
		if first || p.used < at {
			oldest, at, first = name, p.used, false
		}
	}
	delete(h.pols, oldest)
}
