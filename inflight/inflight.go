// SPDX-License-Identifier: Apache-2.0

package inflight

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultTTL is how long an in-flight slot is held without an
// Extend before the store reclaims it. It bounds how long the slots of a
// process that died (SIGKILL, a lost machine) stay taken: they are usable
// again DefaultTTL after their last Acquire or Extend. Ten seconds is
// longer than most requests (a request that runs longer calls Extend, or
// uses Holder.KeepAlive) and short enough that a crash costs a few seconds
// of capacity, not minutes.
const DefaultTTL = 10 * time.Second

// Controller moves an in-flight limit from what it observes: package
// adaptive has AIMD and gradient controllers. Its methods are called
// concurrently.
type Controller interface {
	// Limit returns the current limit, at least 1.
	Limit() int64
	// Observe reports one finished request.
	Observe(s Sample)
}

// Sample is one finished request, as a Controller sees it.
type Sample struct {
	// At is when the request finished.
	At time.Time
	// RTT is how long it held its slot.
	RTT time.Duration
	// InFlight is the number of requests this process had in flight when
	// it started, itself included.
	InFlight int64
	// Dropped reports that it failed in a way that says the backend is
	// overloaded: a timeout, a 503, an error the caller chose to count.
	Dropped bool
}

// Limiter limits how many requests per key are in flight at once across
// every process sharing its store: each request holds a slot in a
// Semaphore for as long as it runs, under a TTL so that a process that dies
// gives its slots back. The limit is fixed, or moved by a Controller.
//
// With a reserve (WithReserve), the last slots are kept for critical
// requests: with limit L and reserve fraction f, R = ⌊L·f⌋ slots are
// reserved (exactly, f being the decimal the caller wrote: see
// WithReserve), a non-critical request is admitted iff fewer than L − R are
// held, and a critical one iff fewer than L are held. So at most L are ever
// held and at most L − R by non-critical work when critical work is
// waiting; non-critical work is shed first.
//
// Make one with New: the zero Limiter (and a nil *Limiter) has no store,
// and its Acquire refuses every request with an error; its other methods
// answer zero values (no name, a limit of 0, no reserve).
type Limiter struct {
	store    Semaphore
	name     string
	limit    int64
	ctrl     Controller
	ttl      time.Duration
	reserve  reserve
	failure  sluice.FailureMode
	local    Semaphore             // FailLocal's in-process store
	replicas sluice.ReplicaCounter // FailLocal's replica count
	clock    func() time.Time
	inflight atomic.Int64 // this process's holders
	retries  retries      // releases to try again
}

// Option configures a Limiter.
type Option func(*Limiter) error

// WithTTL sets how long a slot is held without an Extend
// (DefaultTTL unless set): at least 1ms and at most sluice.MaxPeriod.
func WithTTL(d time.Duration) Option {
	return func(f *Limiter) error {
		if d < time.Millisecond || d > sluice.MaxPeriod {
			return fmt.Errorf("inflight: WithTTL: %v: must be at least 1ms and at most %v", d, sluice.MaxPeriod)
		}
		f.ttl = d
		return nil
	}
}

// WithController makes a Controller set the limit; the limit given to
// New is then unused (pass 0).
func WithController(c Controller) Option {
	return func(f *Limiter) error {
		if c == nil {
			return errors.New("inflight: WithController: nil Controller")
		}
		f.ctrl = c
		return nil
	}
}

// WithReserve keeps the fraction frac (in [0, 1)) of the limit, rounded
// down, for critical requests: R = ⌊L·f⌋ slots at the limit L, computed
// exactly for every L, where f is the shortest decimal that reads back as
// frac (strconv.FormatFloat(frac, 'f', -1, 64)), so 0.29 means 29/100 and
// reserves 29 of 100, not the 28 its binary value would.
func WithReserve(frac float64) Option {
	return func(f *Limiter) error {
		if !(frac >= 0 && frac < 1) {
			return fmt.Errorf("inflight: WithReserve: %v: must be in [0, 1)", frac)
		}
		f.reserve = newReserve(frac)
		return nil
	}
}

// WithFailureMode sets what Acquire answers when the store fails
// (FailOpen unless set).
func WithFailureMode(m sluice.FailureMode) Option {
	return func(f *Limiter) error { f.failure = m; return nil }
}

// WithLocal sets what a Limiter that fails local (FailLocal)
// acquires on while its store fails: the in-process Semaphore local (a
// memstore), holding this replica's share of the limit, ⌊L/R⌋ slots, with R
// from replicas (FixedReplicas(1) when nil). A share of 0 (R > L) admits
// nothing. The bound: during an outage the fleet's new work in flight is at
// most R·⌊L/R⌋ ≤ L, beside the holders from before the outage that are
// still running (at most L, gone within their TTL), so at most 2L are in
// flight at once, and at most L once the pre-outage holders are done.
func WithLocal(local Semaphore, replicas sluice.ReplicaCounter) Option {
	return func(f *Limiter) error {
		if local == nil {
			return errors.New("inflight: WithLocal: local store is nil")
		}
		if replicas == nil {
			replicas = sluice.FixedReplicas(1)
		}
		f.local, f.replicas = local, replicas
		return nil
	}
}

// WithClock sets the clock that times requests for the Controller
// (time.Now unless set, or set to nil).
func WithClock(now func() time.Time) Option {
	return func(f *Limiter) error {
		if now == nil {
			now = time.Now
		}
		f.clock = now
		return nil
	}
}

// New returns an in-flight limit named name (the store keeps its
// holders under that name) of limit slots per key over store.
func New(store Semaphore, name string, limit int64, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("inflight: New: store is nil")
	}
	if name == "" {
		return nil, errors.New("inflight: New: name is empty")
	}
	f := &Limiter{store: store, name: name, limit: limit, ttl: DefaultTTL, clock: time.Now}
	for _, o := range opts {
		if o == nil {
			continue // a nil option is no option
		}
		if err := o(f); err != nil {
			return nil, err
		}
	}
	if f.failure == sluice.FailLocal && f.local == nil {
		return nil, fmt.Errorf("inflight: New %q: failure mode local needs WithLocal", name)
	}
	if f.ctrl == nil && limit < 1 {
		return nil, fmt.Errorf("inflight: New %q: limit %d: must be at least 1", name, limit)
	}
	return f, nil
}

// Name returns the limit's name.
func (f *Limiter) Name() string {
	if f == nil {
		return ""
	}
	return f.name
}

// Limit returns the current limit: the fixed one, or the Controller's.
func (f *Limiter) Limit() int64 {
	if f == nil {
		return 0
	}
	if f.ctrl != nil {
		return max(f.ctrl.Limit(), 1)
	}
	return f.limit
}

// Adaptive reports whether a Controller sets the limit.
func (f *Limiter) Adaptive() bool { return f != nil && f.ctrl != nil }

// TTL returns how long a slot is held without an Extend.
func (f *Limiter) TTL() time.Duration {
	if f == nil {
		return 0
	}
	return f.ttl
}

// FailureMode returns what Acquire answers when the store fails.
func (f *Limiter) FailureMode() sluice.FailureMode {
	if f == nil {
		return sluice.FailOpen // the zero Limiter's
	}
	return f.failure
}

// errNoLimiter is Acquire's error on a Limiter New did not make: as for a
// sluice.Limiter without a store, it wraps sluice.ErrStoreClosed (never a
// reason to admit).
var errNoLimiter = fmt.Errorf("inflight: Acquire: the Limiter has no store (make it with New): %w", sluice.ErrStoreClosed)

// Reserved returns the number of slots kept for critical requests at the
// limit l: ⌊l·f⌋, exactly (see WithReserve), and 0 for l ≤ 0.
func (f *Limiter) Reserved(l int64) int64 {
	if f == nil {
		return 0
	}
	return f.reserve.of(l)
}

// LimitFor returns the limit Acquire enforces for a request now: Limit for
// a critical one, and Limit less Reserved(Limit) for any other.
func (f *Limiter) LimitFor(critical bool) int64 {
	l := f.Limit()
	if !critical {
		l -= f.Reserved(l)
	}
	return l
}

// Acquire takes a slot of key if one is free now, for a critical request
// or not. It returns the holder, or nil when every slot open to the request
// is taken. On a store failure it returns the error and, under FailOpen, a
// holder that holds nothing (its Release does nothing), under FailClosed
// nil. When ctx has ended it returns nil and the error.
func (f *Limiter) Acquire(ctx context.Context, key string, critical bool) (*Holder, Slots, error) {
	if f == nil || f.store == nil {
		return nil, Slots{}, errNoLimiter
	}
	limit := f.LimitFor(critical)
	id := newHolderID()
	started := f.clock()
	s, err := f.store.Acquire(ctx, f.name, key, id, limit, f.ttl)
	if err != nil {
		closed := errors.Is(err, sluice.ErrStoreClosed)
		if !closed {
			// The store may have taken the slot before failing to
			// answer: give it back (Release is idempotent), or it stays
			// taken until its TTL.
			f.retries.add(f, f.store, key, id)
		}
		err = fmt.Errorf("inflight: %q: key %q: %w", f.name, key, err)
		switch {
		case closed || ctx.Err() != nil || f.failure == sluice.FailClosed:
			// A closed store is never a reason to admit, nor is a
			// caller that has gone.
			return nil, Slots{}, err
		case f.failure == sluice.FailLocal:
			return f.acquireLocal(ctx, key, id, limit, started, err)
		}
		return &Holder{}, Slots{Acquired: true}, err
	}
	if !s.Acquired {
		return nil, s, nil
	}
	n := f.inflight.Add(1)
	return &Holder{f: f, sem: f.store, key: key, id: id, started: started, inflight: n}, s, nil
}

// acquireLocal takes a slot of this replica's share, ⌊limit/R⌋, on the
// local store, after the store failed with storeErr.
func (f *Limiter) acquireLocal(ctx context.Context, key, id string, limit int64, started time.Time, storeErr error) (*Holder, Slots, error) {
	share := limit / int64(max(f.replicas.Replicas(), 1))
	if share < 1 {
		return nil, Slots{}, storeErr
	}
	s, err := f.local.Acquire(context.WithoutCancel(ctx), f.name, key, id, share, f.ttl)
	if err != nil || !s.Acquired {
		return nil, s, storeErr
	}
	n := f.inflight.Add(1)
	return &Holder{f: f, sem: f.local, key: key, id: id, started: started, inflight: n}, s, storeErr
}

// Holder is one held slot of a Limiter. The zero Holder (and a nil
// *Holder) holds nothing: its methods do nothing and report no error.
type Holder struct {
	f        *Limiter  // nil: holds nothing (admitted on a store failure)
	sem      Semaphore // where the slot is held: the store, or sluice.FailLocal's local one
	key, id  string
	started  time.Time
	inflight int64
	done     atomic.Bool
	mu       sync.Mutex  // guards timer
	timer    *time.Timer // KeepAlive's
}

// ID returns the holder's id in the store ("" when it holds nothing).
func (h *Holder) ID() string {
	if h == nil {
		return ""
	}
	return h.id
}

// Release gives the slot back and, for an adaptive limit, reports the
// request to the Controller (dropped: it failed because the backend is
// overloaded). Only the first call of Release or Cancel does anything.
func (h *Holder) Release(ctx context.Context, dropped bool) error {
	return h.release(ctx, true, dropped)
}

// Cancel gives the slot back without reporting the request to the
// Controller: for a request that took the slot but never ran (another limit
// refused it), whose time in flight says nothing of the backend's latency.
// Only the first call of Release or Cancel does anything.
func (h *Holder) Cancel(ctx context.Context) error {
	return h.release(ctx, false, false)
}

// release is Release, reporting to the Controller only if observe.
func (h *Holder) release(ctx context.Context, observe, dropped bool) error {
	if h == nil || h.f == nil || h.done.Swap(true) {
		return nil
	}
	h.mu.Lock()
	if h.timer != nil {
		h.timer.Stop()
	}
	h.mu.Unlock()
	f := h.f
	f.inflight.Add(-1)
	if f.ctrl != nil && observe {
		now := f.clock()
		f.ctrl.Observe(Sample{At: now, RTT: now.Sub(h.started), InFlight: h.inflight, Dropped: dropped})
	}
	if _, err := h.sem.Release(ctx, f.name, h.key, h.id); err != nil {
		// Try once more in the background (retries); failing that, the
		// slot comes back when its TTL passes.
		f.retries.add(f, h.sem, h.key, h.id)
		return fmt.Errorf("inflight: %q: key %q: release: %w", f.name, h.key, err)
	}
	return nil
}

// Extend renews the slot's TTL from now, for work that runs longer than
// it. It reports false when the slot had already been reclaimed (its TTL
// passed): the work then no longer counts against the limit.
func (h *Holder) Extend(ctx context.Context) (bool, error) {
	if h == nil || h.f == nil || h.done.Load() {
		return false, nil
	}
	s, err := h.sem.Extend(ctx, h.f.name, h.key, h.id, h.f.ttl)
	if err != nil {
		return false, fmt.Errorf("inflight: %q: key %q: extend: %w", h.f.name, h.key, err)
	}
	return s.Acquired, nil
}

// KeepAlive extends the slot every third of its TTL until ctx ends or the
// holder is released, so work of any length keeps its slot while this
// process lives. It returns at once; each extension runs on a timer, and
// none is left once the holder is released. Call it once.
func (h *Holder) KeepAlive(ctx context.Context) {
	if h == nil || h.f == nil {
		return
	}
	every := h.f.ttl / 3
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done.Load() {
		return
	}
	h.timer = time.AfterFunc(every, func() {
		if ctx.Err() != nil || h.done.Load() {
			return
		}
		if ok, err := h.Extend(ctx); err == nil && !ok {
			return // reclaimed: extending cannot bring it back
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.done.Load() {
			h.timer.Reset(every)
		}
	})
}

// newHolderID returns a random 128-bit holder id in hex.
func newHolderID() string {
	var b [16]byte
	a, c := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		b[i], b[8+i] = byte(a>>(8*i)), byte(c>>(8*i))
	}
	return hex.EncodeToString(b[:])
}

// maxRetries bounds the releases a Limiter keeps to try again: beyond it,
// a slot that could not be released comes back when its TTL passes.
const maxRetries = 256

// retries is a Limiter's releases to try again after a store failure,
// tried one at a time by at most one goroutine, so that a failing store
// costs no goroutine per request.
type retries struct {
	mu      sync.Mutex
	queue   []retry
	running bool
}

type retry struct {
	sem     Semaphore
	key, id string
}

// add queues a release of holder id of key on sem, unless maxRetries are
// queued already.
func (r *retries) add(f *Limiter, sem Semaphore, key, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) >= maxRetries {
		return
	}
	r.queue = append(r.queue, retry{sem, key, id})
	if !r.running {
		r.running = true
		go r.drain(f)
	}
}

// drain tries the queued releases in turn, each for at most the TTL (after
// which the slot is back anyway), and ends when the queue is empty.
func (r *retries) drain(f *Limiter) {
	for {
		r.mu.Lock()
		if len(r.queue) == 0 {
			r.running = false
			r.queue = nil
			r.mu.Unlock()
			return
		}
		next := r.queue[0]
		r.queue = r.queue[1:]
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), f.ttl)
		next.sem.Release(ctx, f.name, next.key, next.id)
		cancel()
	}
}
