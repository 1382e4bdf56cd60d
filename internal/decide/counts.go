// SPDX-License-Identifier: Apache-2.0

package decide

import "sync/atomic"

// Counts counts what a front end did with its requests, by outcome. The
// zero Counts is ready; it is safe for concurrent use.
type Counts struct {
	Admitted, Refused, Delayed, ShadowRefused, Errors, Unavailable, Gone, Malformed atomic.Uint64
}

// Verdict counts the rate limits' verdict on one request: its outcome but
// an admission (Passed counts the requests that reach the handler; an
// admission held for a delay counts as Delayed), its store failure (Errors
// counts requests: the request's in-flight limits do not count it again,
// see Taken), and the refusals of its shadow checks.
func (c *Counts) Verdict(v *Verdict) {
	if v.StoreFailed() {
		c.Errors.Add(1)
	}
	for _, d := range v.Shadow {
		if !d.Allowed {
			c.ShadowRefused.Add(1)
		}
	}
	switch v.Outcome {
	case Admit:
		if v.Wait > 0 {
			c.Delayed.Add(1)
		}
	default:
		c.outcome(v.Outcome)
	}
}

// Passed counts a request that a limit (a rate or an in-flight one)
// decided and that reaches the handler: once, whatever the number of
// limits.
func (c *Counts) Passed() { c.Admitted.Add(1) }

// Taken counts the answer of one in-flight limit of a request: any outcome
// but Admit (Passed counts the requests let through), and its store failure
// unless failed says one is counted for the request already (by its rates'
// Verdict or an earlier Taken): Errors counts requests the store could not
// decide, once each, whatever the number of limits that failed. It returns
// whether a store failure is now counted for the request, for the next
// Taken.
func (c *Counts) Taken(t Taken, failed bool) bool {
	if t.StoreFailed() && !failed {
		c.Errors.Add(1)
		failed = true
	}
	if t.Outcome != Admit {
		c.outcome(t.Outcome)
	}
	return failed
}

// NoKey counts a request refused because a limit had no key for it.
func (c *Counts) NoKey() { c.Malformed.Add(1) }

func (c *Counts) outcome(o Outcome) {
	switch o {
	case Refuse:
		c.Refused.Add(1)
	case Gone:
		c.Gone.Add(1)
	default:
		c.Unavailable.Add(1)
	}
}
