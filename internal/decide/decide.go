// SPDX-License-Identifier: Apache-2.0

// Package decide is the one decision core of sluice's front ends: given a
// request's checks it answers admit, refuse (with the violated limits and
// the wait), unavailable, or client gone. httplimit, grpclimit and the rate
// limit service only render its answer.
//
// The rules, each written once here:
//
//   - A caller whose context has ended before the answer is Gone: never
//     admitted, never counted as a store error, whatever the failure modes
//     say (the store may even have answered).
//   - The checks are decided in one sluice.AllowAll batch, all-or-nothing.
//     Shadow checks decide and record but never refuse: a request only
//     they refuse is decided again without them, so it consumes what it
//     would have consumed had they been absent.
//   - When the store fails, each check's failure mode decides: the request
//     is Unavailable if an enforced check fails closed, refused if a check
//     that fails local refused it on its local share, and admitted
//     otherwise. A refusal decided that way is never Impossible (the store
//     could admit the request once it is back).
//   - A batch that could not be decided at all (no decisions, or a closed
//     store: a misconfiguration, never a limit exceeded) is Unavailable: an
//     error is never a reason to admit. (Limiters over different stores
//     are refused when a front end is built: Order.)
//   - A leaky-bucket request whose queue delay would pass the longest delay
//     allowed (Request.MaxDelay, or its deadline if that comes sooner) is
//     refused in the same store call that would admit it, taking no place
//     in the queue: the bound is the check's sluice.Check.MaxDelay, which
//     the policy that decides (the store's, or a local share's when the
//     store fails) turns into the burst B_c = min(B, ⌊D/T⌋ + c) for a
//     request of cost c, D the bound and T = Period/Limit: admitted iff
//     its queue delay is at most ⌊D/T⌋·T, so never a Delay past D, and
//     exactly up to D when D is a multiple of T (emission.Burst derives it
//     from package model's rule). A request refused by its deadline alone
//     is Gone at once. An admitted one is held for its delay, and is Gone
//     if its caller leaves meanwhile. A leaky-bucket decision's Remaining
//     is the requests of cost 1 that still fit within MaxDelay: min(B,
//     ⌊MaxDelay/T⌋ + 1) − ⌈δ/T⌉, δ the queue delay after the request (none
//     after a refusal by the maximum).
package decide

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/line"
)

// Outcome is what a front end does with a request.
type Outcome uint8

const (
	// Unavailable: the store failed and an enforced limit fails closed, or
	// nothing could be decided. It is the zero Outcome, so that a request
	// nobody decided is never admitted.
	Unavailable Outcome = iota
	// Admit: every enforced limit admits the request.
	Admit
	// Refuse: an enforced limit refuses the request.
	Refuse
	// Gone: the caller's context ended before the answer. The request is
	// not admitted, and no store error is counted.
	Gone
)

// String returns the outcome's name: "unavailable", "admit", "refuse" or
// "gone".
func (o Outcome) String() string {
	switch o {
	case Admit:
		return "admit"
	case Refuse:
		return "refuse"
	case Gone:
		return "gone"
	}
	return "unavailable"
}

// DefaultMaxDelay is the longest a front end holds a request for a
// leaky-bucket policy unless told otherwise.
const DefaultMaxDelay = 10 * time.Second

// Request is one request's checks, as a front end compiled them.
type Request struct {
	// Checks are the enforced checks, then the shadow ones.
	Checks []sluice.Check
	// Enforced is how many of Checks are enforced.
	Enforced int
	// MaxDelay is the longest an admitted request is held for a
	// leaky-bucket policy; one whose delay would be longer is refused
	// (B_c above). Zero holds no request: every delay is too long.
	MaxDelay time.Duration
	// Leaky says an enforced check may be leaky-bucket: Decide then sets
	// the MaxDelay of the enforced checks in Checks to the bound (a hint
	// that spares the other requests the deadline's look). Order refuses a
	// leaky-bucket policy without a Name that would need one.
	Leaky bool
	// Jitter, when positive, adds a random duration in [0, Jitter) to the
	// Wait of a refusal that can succeed later, so that clients refused
	// together do not all come back at once. The Wait is never shorter than
	// the real one.
	Jitter time.Duration
}

// Verdict is the decision on one request.
type Verdict struct {
	// Outcome is what to do with the request.
	Outcome Outcome
	// Decisions are the decisions of the enforced checks
	// Request.Checks[Offset:Offset+len(Decisions)], on Admit and Refuse (and
	// on Unavailable when the failure modes decided).
	Decisions []sluice.Decision
	// Offset is the index in Request.Checks of Decisions[0].
	Offset int
	// Shadow are the shadow checks' decisions; those not Allowed are the
	// refusals that were not enforced. nil when they were not decided.
	Shadow []sluice.Decision
	// Wait is, on Refuse, the longest RetryAfter of the violated checks
	// plus the Request's jitter, and on Admit the delay the request was held
	// for (leaky-bucket).
	Wait time.Duration
	// Impossible: on Refuse, a violated check can never admit the request.
	Impossible bool
	// Err is the store's error when it failed (the failure modes then
	// decided) or nothing could be decided, and the context's on Gone.
	Err error
	// (A Verdict holds no pointer into the Request: a front end's checks
	// stay on its stack even when the Verdict's error escapes.)
}

// StoreFailed reports whether the store failed on the request: an error
// that is not the caller's leaving. A front end counts it once.
func (v *Verdict) StoreFailed() bool { return v.Err != nil && v.Outcome != Gone }

// Violated reports whether Decisions[k] is a reason the request was not
// admitted: a refusal (Refuse), or a check that fails closed while the
// store failed (Unavailable). checks are the Request's Checks.
func (v *Verdict) Violated(checks []sluice.Check, k int) bool {
	switch v.Outcome {
	case Refuse:
		return !v.Decisions[k].Allowed
	case Unavailable:
		return checks[v.Offset+k].Limiter.FailureMode() == sluice.FailClosed
	}
	return false
}

// Decide decides q: the batch (with the leaky-bucket bound), the failure
// modes, and the hold for an admitted request's delay.
func Decide(ctx context.Context, q Request) Verdict {
	v := decide(ctx, q)
	if v.Outcome == Admit && v.Wait > 0 {
		if err := line.Sleep(ctx, v.Wait); err != nil {
			return Verdict{Outcome: Gone, Err: err}
		}
	}
	return v
}

// decide is Decide but the hold.
func decide(ctx context.Context, q Request) Verdict {
	if err := ctx.Err(); err != nil {
		return Verdict{Outcome: Gone, Err: err}
	}
	if len(q.Checks) == 0 {
		return Verdict{Outcome: Admit}
	}
	enforced := q.Checks[:q.Enforced]
	var bound time.Duration
	var deadline bool
	if q.Leaky {
		bound, deadline = boundOf(ctx, q.MaxDelay)
		bindLeaky(enforced, bound)
	}
	res, err := sluice.AllowAll(ctx, q.Checks...)
	var shadow []sluice.Decision
	if err == nil && len(q.Checks) > q.Enforced {
		shadow = res.Decisions[q.Enforced:]
		if !res.Allowed && allAllowed(res.Decisions[:q.Enforced]) {
			// Only shadow checks refused: had they been enforced, nothing
			// would have been consumed; decide again without them.
			res, err = sluice.AllowAll(ctx, enforced...)
		}
	}
	var gone error
	// The decisions are the store's, or the failure modes' when it failed
	// (those Classify reads, with the same tests).
	decided := len(res.Decisions) >= q.Enforced && (err == nil || ctx.Err() == nil && !errors.Is(err, sluice.ErrStoreClosed))
	if q.Leaky && decided {
		gone = settleLeaky(enforced, res.Decisions[:q.Enforced], err != nil, bound, q.MaxDelay, deadline)
	}
	v := Classify(ctx, enforced, res, err)
	v.Shadow = shadow
	if gone != nil && v.Outcome == Refuse {
		// Refused by its deadline alone.
		return Verdict{Outcome: Gone, Err: gone, Shadow: shadow}
	}
	if v.Outcome == Refuse && !v.Impossible && q.Jitter > 0 {
		v.Wait += rand.N(q.Jitter)
	}
	return v
}

// errNoDecision is the error of a batch that returned fewer decisions than
// it had checks, and no error of its own.
var errNoDecision = errors.New("decide: the batch returned no decision")

// Classify turns the answer of a batch of checks (sluice.AllowAll's result
// and error, as the enforced checks see it: res.Decisions[:len(checks)])
// into a Verdict. The rate limit service, which runs its own batches,
// classifies each of them here.
func Classify(ctx context.Context, checks []sluice.Check, res sluice.Result, err error) Verdict {
	if cerr := ctx.Err(); cerr != nil {
		return Verdict{Outcome: Gone, Err: cerr}
	}
	if len(res.Decisions) < len(checks) || errors.Is(err, sluice.ErrStoreClosed) {
		// Undecided, or a closed store (or a Limiter without one): no
		// failure mode answers it, and no limit was exceeded.
		if err == nil {
			err = errNoDecision
		}
		return Verdict{Outcome: Unavailable, Err: err}
	}
	ds := res.Decisions[:len(checks)]
	v := Verdict{Outcome: Admit, Decisions: ds, Err: err}
	var delay, wait time.Duration
	for k, d := range ds {
		switch {
		case d.Allowed:
			delay = max(delay, d.Delay)
		case err != nil && checks[k].Limiter.FailureMode() == sluice.FailClosed:
			v.Outcome, v.Impossible = Unavailable, false
			return v
		default:
			v.Outcome = Refuse
			wait = max(wait, d.RetryAfter)
			// A refusal the failure modes decided is never impossible:
			// the store could admit the request once it is back.
			v.Impossible = v.Impossible || d.Impossible && err == nil
		}
	}
	if v.Outcome == Refuse {
		v.Wait = wait
	} else {
		v.Wait = delay
	}
	return v
}

// allAllowed reports whether every decision admits.
func allAllowed(ds []sluice.Decision) bool {
	for _, d := range ds {
		if !d.Allowed {
			return false
		}
	}
	return true
}
