// SPDX-License-Identifier: Apache-2.0

// Package line serves the callers of one key in arrival order, each until
// its context ends: the queue behind sluice.Limiter.Wait.
package line

import (
	"context"
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
	busy    bool
	waiting []chan struct{}
}

// Enter waits for key's line to reach the caller, or for ctx to end.
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
	turn := make(chan struct{}, 1)
	q.waiting = append(q.waiting, turn)
	ls.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		ls.mu.Lock()
		for i, w := range q.waiting {
			if w == turn {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				ls.mu.Unlock()
				return ctx.Err()
			}
		}
		ls.mu.Unlock()
		// The turn came as ctx ended: pass it on.
		ls.Leave(key)
		return ctx.Err()
	}
}

// Leave ends the current turn of key's line: the next waiter's begins.
func (ls *Lines) Leave(key string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	q := ls.m[key]
	if len(q.waiting) > 0 {
		next := q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		next <- struct{}{}
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
