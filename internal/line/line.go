// SPDX-License-Identifier: Apache-2.0

// Package line serves the callers of one key in arrival order, each until
// its context ends: the queue behind sluice.Limiter.Wait.
package line

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Lines is a line per key: callers of Enter for one key take turns in
// arrival order, each until its Leave. The zero Lines is ready to use.
type Lines struct {
	mu sync.Mutex
	m  map[string]*line
}

type line struct {
	busy bool
	// notBefore is when the current turn may end at the earliest (Hold),
	// or zero.
	notBefore time.Time
	waiting   []*waiter
}

// waiter is a caller waiting for its turn.
type waiter struct {
	turn     chan error // nil: its turn; ErrTooLate: it left the line
	deadline time.Time  // its context's, or zero
}

// ErrTooLate is Enter's error for a caller whose context's deadline comes
// before the current turn can end (Hold): its own turn could only begin
// after its deadline.
var ErrTooLate = errors.New("the turn ahead in line ends after the context deadline")

// Enter waits for key's line to reach the caller, or for ctx to end. It
// returns ErrTooLate at once, without waiting, when ctx's deadline comes
// before the current turn can end; a caller already waiting leaves with
// ErrTooLate as soon as a Hold shows that.
func (ls *Lines) Enter(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ls.mu.Lock()
	if ls.m == nil {
		ls.m = make(map[string]*line)
	}
	q := ls.m[key]
	if q == nil {
		q = &line{}
		ls.m[key] = q
	}
	if !q.busy {
		q.busy = true
		ls.mu.Unlock()
		return nil
	}
	deadline, _ := ctx.Deadline()
	if tooLate(deadline, q.notBefore) {
		ls.mu.Unlock()
		return ErrTooLate
	}
	w := &waiter{turn: make(chan error, 1), deadline: deadline}
	q.waiting = append(q.waiting, w)
	ls.mu.Unlock()
	select {
	case err := <-w.turn:
		return err
	case <-ctx.Done():
		ls.mu.Lock()
		for i, o := range q.waiting {
			if o == w {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				ls.mu.Unlock()
				return ctx.Err()
			}
		}
		ls.mu.Unlock()
		// The turn (or ErrTooLate) came as ctx ended: pass a turn on.
		if err := <-w.turn; err == nil {
			ls.Leave(key)
		}
		return ctx.Err()
	}
}

// tooLate reports whether a deadline (zero: none) comes before notBefore
// (zero: unknown).
func tooLate(deadline, notBefore time.Time) bool {
	return !deadline.IsZero() && !notBefore.IsZero() && deadline.Before(notBefore)
}

// Hold records that the current turn of key's line cannot end before
// until (its holder sleeps until then): the waiters whose deadline comes
// before it leave the line with ErrTooLate. (Should the holder leave
// sooner, its context ending, those waiters have left for nothing; they
// had asked for an answer sooner than the line could promise one.)
func (ls *Lines) Hold(key string, until time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	q := ls.m[key]
	if q == nil {
		return
	}
	q.notBefore = until
	kept := q.waiting[:0]
	for _, w := range q.waiting {
		if tooLate(w.deadline, until) {
			w.turn <- ErrTooLate
			continue
		}
		kept = append(kept, w)
	}
	clear(q.waiting[len(kept):])
	q.waiting = kept
}

// Leave ends the current turn of key's line: the next waiter's begins.
func (ls *Lines) Leave(key string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	q := ls.m[key]
	q.notBefore = time.Time{}
	if len(q.waiting) > 0 {
		next := q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		next.turn <- nil
		return
	}
	delete(ls.m, key)
}

// Fits reports whether waiting d ends before ctx's deadline.
func Fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || !time.Now().Add(d).After(deadline)
}

// Sleep waits for d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
