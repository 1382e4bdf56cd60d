// SPDX-License-Identifier: Apache-2.0

package server

import (
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
)

// WithResponseHeaders makes ShouldRateLimit answers carry response headers
// for Envoy to add to the client's response, in the format of the HTTP
// middleware (httplimit): RateLimit-Policy and RateLimit as in
// draft-ietf-httpapi-ratelimit-headers-10, one item per enforced rule named
// by its title (config.Rule.Title: its name, else its key), and
// Retry-After in whole seconds (rounded up) on OVER_LIMIT; with legacy,
// also X-RateLimit-Limit, -Remaining and -Reset for the most constrained
// rule. A zero-limit rule is a quota of 0 whose reset, and wait when it
// refuses, is the end of its unit's window, as envoyproxy/ratelimit
// reports it.
func WithResponseHeaders(legacy bool) Option {
	return func(s *Server) { s.headers, s.legacyHeaders = true, legacy }
}

// printable reports whether a rule's name can be sent as a Structured Field
// Values String: non-empty, printable ASCII.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}

// responseHeaders returns the headers for outs, decided at now, or nil.
//
// A zero-limit rule (config.Rule.Deny) is described as envoyproxy/ratelimit
// describes it, and so is the descriptor it refuses: a quota of 0 in a
// window of its unit, nothing remaining, and, when it refused, its reset
// and Retry-After at the end of that window (denyState).
func responseHeaders(outs []outcome, allowed, legacy bool, now time.Time) []*corev3.HeaderValue {
	var policy, state []byte
	var retry int64 = -1
	var best *headerItem
	for i := range outs {
		o := &outs[i]
		r := o.rule
		if r == nil || r.Unlimited || r.ShadowMode || !printable(r.Title()) {
			continue
		}
		it := headerItem{p: r.Policy, d: o.decision, over: o.over}
		if r.Deny {
			it.p, it.d = denyState(r, now)
		}
		it.p.Name = r.Title() // the rule's one name (config.Rule.Title)
		it.d.Allowed = !o.over
		if len(policy) > 0 {
			policy = append(policy, ", "...)
			state = append(state, ", "...)
		}
		policy = append(policy, httplimit.PolicyItem(it.p)...)
		// The format is the middleware's: on a refusal only the violated
		// rules carry t (their wait), so Retry-After never precedes a reset.
		state = httplimit.AppendStateItem(state, it.p.Name, it.d, !allowed)
		if o.over && !it.d.Impossible {
			retry = max(retry, httplimit.RetryAfterSeconds(it.d))
		}
		if best == nil || it.moreConstrained(best) {
			best = &it
		}
	}
	if best == nil {
		return nil
	}
	hs := []*corev3.HeaderValue{
		{Key: "RateLimit-Policy", Value: string(policy)},
		{Key: "RateLimit", Value: string(state)},
	}
	if !allowed && retry >= 0 {
		hs = append(hs, &corev3.HeaderValue{Key: "Retry-After", Value: strconv.FormatInt(retry, 10)})
	}
	if legacy {
		limit, remaining, reset := httplimit.Legacy(best.p, best.d)
		hs = append(hs,
			&corev3.HeaderValue{Key: "X-RateLimit-Limit", Value: limit},
			&corev3.HeaderValue{Key: "X-RateLimit-Remaining", Value: remaining},
			&corev3.HeaderValue{Key: "X-RateLimit-Reset", Value: reset},
		)
	}
	return hs
}

// headerItem is one rule's part in the headers: its policy (named by its
// title) and its decision (Allowed: not over).
type headerItem struct {
	p    sluice.Policy
	d    sluice.Decision
	over bool
}

// moreConstrained: a refusal with the longer wait, else the fewer left.
func (a *headerItem) moreConstrained(b *headerItem) bool {
	switch {
	case a.over && !b.over:
		return true
	case a.over && b.over:
		return a.d.RetryAfter > b.d.RetryAfter
	case !a.over && !b.over:
		return a.d.Remaining < b.d.Remaining
	}
	return false
}

// denyState is the policy and decision a zero-limit rule r shows at now: a
// fixed window of its unit (× its multiplier) with a quota of 0, nothing
// remaining, and the rest of that window as its wait (RetryAfter) and its
// reset, which is what envoyproxy/ratelimit reports for it (its
// duration_until_reset, toProto, is the same).
func denyState(r *config.Rule, now time.Time) (sluice.Policy, sluice.Decision) {
	var p sluice.Policy
	var d sluice.Decision
	if unit, ok := config.UnitDuration(r.Unit); ok {
		p = sluice.Policy{Algorithm: sluice.FixedWindow, Period: unit * time.Duration(max(1, r.UnitMultiplier))}
		d.RetryAfter = windowLeft(p.Period, now)
		d.ResetAfter = d.RetryAfter
	}
	return p, d
}
