// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
)

// The in-flight half of the core: the slots a request takes after its rates
// admitted it. This file alone names the in-flight types.

// Slots are the in-flight slots one request holds. The zero Slots holds
// none; take slots with Take, and give them back with Release once the
// request has run. A Slots is used by one request, not concurrently.
type Slots struct {
	buf  [8]*inflight.Holder
	n    int
	more []*inflight.Holder
}

// Taken is the answer of one in-flight limit.
type Taken struct {
	// Outcome is Admit (a slot is held), Refuse (every slot open to the
	// request is taken, or the store failed and the local share is full),
	// Unavailable (the store failed and the limit fails closed, or the
	// store is closed, whatever the failure mode: see Cause) or Gone.
	Outcome Outcome
	// Limit is the number of slots a request like this one may hold: the
	// limit enforced for it (inflight.Limiter.LimitFor, less the reserve
	// unless it is critical), which a front end advertises as the limit's
	// capacity (RateLimit-Policy's q), not the limit with the reserve that
	// the request can never take.
	Limit int64
	// Free is the number of slots left to a request like this one after
	// it was admitted, when known: Limit less the slots held, never below
	// 0.
	Free int64
	// Err is the store's error (also on an Admit the failure mode
	// decided), or the context's on Gone.
	Err error
}

// StoreFailed reports whether the store failed: an error that is not the
// caller's leaving.
func (t Taken) StoreFailed() bool { return t.Err != nil && t.Outcome != Gone }

// Cause says why an Unavailable Taken was not decided, for a front end's
// message: "its store is closed" (or the limit has none: whatever its
// failure mode, that is never a reason to admit, nor a refusal by the
// limit), or "its store failed and it fails closed".
func (t Taken) Cause() string {
	if errors.Is(t.Err, sluice.ErrStoreClosed) {
		return "its store is closed"
	}
	return "its store failed and it fails closed"
}

// Take takes a slot of f for key. critical says the request may use the
// limit's reserve: a front end says so only for requests its trust function
// vouches for. On any answer but Admit the slots already held are given
// back, without reporting to adaptive controllers (the request never ran).
// An admitted slot is kept alive (for a limit with a TTL) until Release,
// even after the caller has gone: the handler still runs.
func (s *Slots) Take(ctx context.Context, f *inflight.Limiter, key string, critical bool) Taken {
	if err := ctx.Err(); err != nil {
		s.Cancel(ctx)
		return Taken{Outcome: Gone, Err: err}
	}
	h, sl, err := f.Acquire(ctx, key, critical)
	limit := f.LimitFor(critical)
	var t Taken
	switch {
	case ctx.Err() != nil:
		if h != nil {
			h.Cancel(context.WithoutCancel(ctx))
		}
		t = Taken{Outcome: Gone, Err: ctx.Err()}
	case h != nil:
		t = Taken{Outcome: Admit, Limit: limit, Free: max(limit-sl.Held, 0), Err: err}
	case err != nil && (f.FailureMode() != sluice.FailLocal || errors.Is(err, sluice.ErrStoreClosed)):
		// Fails closed, or (for any mode) a closed store, which Acquire
		// never admits and which no local share answers.
		t = Taken{Outcome: Unavailable, Limit: limit, Err: err}
	default: // full, or the store failed and the local share is full
		t = Taken{Outcome: Refuse, Limit: limit, Err: err}
	}
	if t.Outcome != Admit {
		s.Cancel(ctx)
		return t
	}
	if s.n < len(s.buf) {
		s.buf[s.n] = h
		s.n++
	} else {
		s.more = append(s.more, h)
	}
	if f.TTL() > 0 {
		h.KeepAlive(context.WithoutCancel(ctx))
	}
	return t
}

// Release gives back every slot held, reporting to adaptive controllers
// whether the request was dropped (failed because the backend is
// overloaded). ctx's cancellation is ignored: a slot is given back even
// after the caller has gone.
func (s *Slots) Release(ctx context.Context, dropped bool) {
	bg := context.WithoutCancel(ctx)
	for _, h := range s.buf[:s.n] {
		h.Release(bg, dropped)
	}
	for _, h := range s.more {
		h.Release(bg, dropped)
	}
	s.n, s.more = 0, nil
}

// Cancel gives back every slot held without reporting to controllers: for
// a request refused before it ran.
func (s *Slots) Cancel(ctx context.Context) {
	bg := context.WithoutCancel(ctx)
	for _, h := range s.buf[:s.n] {
		h.Cancel(bg)
	}
	for _, h := range s.more {
		h.Cancel(bg)
	}
	s.n, s.more = 0, nil
}
