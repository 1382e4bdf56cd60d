// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"strconv"

	"github.com/sluicehq/sluice"
)

// The RateLimit header fields of draft-ietf-httpapi-ratelimit-headers-10,
// one list member at a time, for other front ends of sluice (the rate limit
// service answers Envoy with the same headers as this middleware).

// PolicyItem formats p as a member of a RateLimit-Policy list:
// "name";q=Q;w=W, where Q is the policy's capacity (the burst of the bucket
// kinds, the limit of the windows) and W the whole seconds, at least 1, that
// capacity takes to refill from empty (the period of the windows). p.Name
// must be printable ASCII.
func PolicyItem(p sluice.Policy) string { return policyItem(p) }

// AppendStateItem appends a member of a RateLimit list for policy name
// decided as d: "name";r=R, with ;t=T unless the request was refused by
// another policy than this one (then its reset could mislead: Retry-After
// never precedes a reset) or d is Impossible. T is, for a refusal, the
// whole seconds until the same request can be admitted, and otherwise until
// the key is idle again.
func AppendStateItem(b []byte, name string, d sluice.Decision, refused bool) []byte {
	b = appendSFString(b, name)
	b = append(b, ";r="...)
	b = appendSFInt(b, d.Remaining)
	if t, ok := reset(d); ok && (!refused || !d.Allowed) {
		b = append(b, ";t="...)
		b = appendSFInt(b, t)
	}
	return b
}

// Legacy returns the values of X-RateLimit-Limit (the policy's capacity),
// X-RateLimit-Remaining and X-RateLimit-Reset (the seconds of the RateLimit
// t parameter) for policy p decided as d.
func Legacy(p sluice.Policy, d sluice.Decision) (limit, remaining, resetSeconds string) {
	q, _ := quota(p)
	t, _ := reset(d)
	return strconv.FormatInt(min(q, maxSFInteger), 10),
		strconv.FormatInt(min(max(d.Remaining, 0), maxSFInteger), 10),
		strconv.FormatInt(min(t, maxSFInteger), 10)
}

// RetryAfterSeconds returns d.RetryAfter in whole seconds, rounded up: a
// Retry-After value that is never earlier than the real wait.
func RetryAfterSeconds(d sluice.Decision) int64 { return ceilSeconds(d.RetryAfter) }
