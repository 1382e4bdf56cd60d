// SPDX-License-Identifier: Apache-2.0

package server

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/sluicehq/sluice/httplimit"
)

// WithResponseHeaders makes ShouldRateLimit answers carry response headers
// for Envoy to add to the client's response, in the format of the HTTP
// middleware (httplimit): RateLimit-Policy and RateLimit as in
// draft-ietf-httpapi-ratelimit-headers-10, one item per enforced rule named
// by its title (config.Rule.Title: its name, else its key), and Retry-After in whole seconds (rounded up) on
// OVER_LIMIT; with legacy, also X-RateLimit-Limit, -Remaining and -Reset
// for the most constrained rule.
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

// responseHeaders returns the headers for outs, or nil.
func responseHeaders(outs []outcome, allowed, legacy bool) []*corev3.HeaderValue {
	var policy, state []byte
	var retry int64 = -1
	best := -1
	for i := range outs {
		o := &outs[i]
		r := o.rule
		if r == nil || r.Unlimited || r.Deny || r.ShadowMode || !printable(r.Title()) {
			continue
		}
		p := r.Policy
		p.Name = r.Title() // the rule's one name (config.Rule.Title)
		if len(policy) > 0 {
			policy = append(policy, ", "...)
			state = append(state, ", "...)
		}
		policy = append(policy, httplimit.PolicyItem(p)...)
		// The format is the middleware's: on a refusal only the violated
		// rules carry t (their wait), so Retry-After never precedes a reset.
		d := o.decision
		d.Allowed = !o.over
		state = httplimit.AppendStateItem(state, p.Name, d, !allowed)
		if o.over && !d.Impossible {
			retry = max(retry, httplimit.RetryAfterSeconds(d))
		}
		if best < 0 || moreConstrained(o, &outs[best]) {
			best = i
		}
	}
	if best < 0 {
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
		o := &outs[best]
		d := o.decision
		d.Allowed = !o.over
		limit, remaining, reset := httplimit.Legacy(o.rule.Policy, d)
		hs = append(hs,
			&corev3.HeaderValue{Key: "X-RateLimit-Limit", Value: limit},
			&corev3.HeaderValue{Key: "X-RateLimit-Remaining", Value: remaining},
			&corev3.HeaderValue{Key: "X-RateLimit-Reset", Value: reset},
		)
	}
	return hs
}

// moreConstrained: a refusal with the longer wait, else the fewer left.
func moreConstrained(a, b *outcome) bool {
	switch {
	case a.over && !b.over:
		return true
	case a.over && b.over:
		return a.decision.RetryAfter > b.decision.RetryAfter
	case !a.over && !b.over:
		return a.decision.Remaining < b.decision.Remaining
	}
	return false
}
