package server

import (
	"math/bits"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/sluicehq/sluice"
)

// WithResponseHeaders makes ShouldRateLimit answers carry response headers
// for Envoy to add to the client's response, in the format of the HTTP
// middleware (httplimit): RateLimit-Policy and RateLimit as in
// draft-ietf-httpapi-ratelimit-headers-10, one item per enforced rule named
// by its key, and Retry-After in whole seconds (rounded up) on
// OVER_LIMIT; with legacy, also X-RateLimit-Limit, -Remaining and -Reset
// for the most constrained rule.
func WithResponseHeaders(legacy bool) Option {
	return func(s *Server) { s.headers, s.legacyHeaders = true, legacy }
}

// maxSFInt is the largest Structured Field Values Integer (RFC 9651).
const maxSFInt = 999_999_999_999_999

func sfInt(b []byte, n int64) []byte { return strconv.AppendInt(b, min(max(n, 0), maxSFInt), 10) }

func sfString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}

func ceilSec(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

// capacity is q and w of RateLimit-Policy: the burst (bucket kinds) or the
// limit, and the whole seconds (at least 1) that capacity takes to refill.
func capacity(p sluice.Policy) (q, w int64) {
	q, window := p.Limit, p.Period
	if p.Algorithm.IsBucket() && p.Burst != 0 {
		q = p.Burst
		hi, lo := bits.Mul64(uint64(p.Burst), uint64(p.Period)) // fits: Validate
		d, _ := bits.Div64(hi, lo, uint64(p.Limit))
		window = time.Duration(d)
	}
	return q, max(ceilSec(window), 1)
}

// responseHeaders returns the headers for outs, or nil.
func responseHeaders(outs []outcome, allowed, legacy bool) []*corev3.HeaderValue {
	var policy, state []byte
	var retry int64 = -1
	best := -1
	for i := range outs {
		o := &outs[i]
		r := o.rule
		if r == nil || r.Unlimited || r.Deny || r.ShadowMode || !printable(r.Policy.Name) {
			continue
		}
		if len(policy) > 0 {
			policy = append(policy, ", "...)
			state = append(state, ", "...)
		}
		q, w := capacity(r.Policy)
		policy = sfString(policy, r.Policy.Name)
		policy = append(policy, ";q="...)
		policy = sfInt(policy, q)
		policy = append(policy, ";w="...)
		policy = sfInt(policy, w)
		d := o.decision
		state = sfString(state, r.Policy.Name)
		state = append(state, ";r="...)
		state = sfInt(state, d.Remaining)
		// On a refusal only the violated rules carry t (their wait), so
		// Retry-After never precedes a reset.
		switch {
		case !o.over && allowed:
			state = append(state, ";t="...)
			state = sfInt(state, ceilSec(d.ResetAfter))
		case o.over && !d.Impossible:
			t := ceilSec(d.RetryAfter)
			state = append(state, ";t="...)
			state = sfInt(state, t)
			retry = max(retry, t)
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
		q, _ := capacity(o.rule.Policy)
		reset := ceilSec(o.decision.ResetAfter)
		if o.over {
			reset = ceilSec(o.decision.RetryAfter)
		}
		hs = append(hs,
			&corev3.HeaderValue{Key: "X-RateLimit-Limit", Value: strconv.FormatInt(min(q, maxSFInt), 10)},
			&corev3.HeaderValue{Key: "X-RateLimit-Remaining", Value: strconv.FormatInt(min(max(o.decision.Remaining, 0), maxSFInt), 10)},
			&corev3.HeaderValue{Key: "X-RateLimit-Reset", Value: strconv.FormatInt(min(reset, maxSFInt), 10)},
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
