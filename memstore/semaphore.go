// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
)

var _ inflight.Semaphore = (*Store)(nil)

// semaphores holds the in-flight limits: per (name, key), each holder's
// expiry in nanoseconds. One lock guards them all; a semaphore's holders
// are few (at most its limit), and every call scans them.
type semaphores struct {
	mu   sync.Mutex
	keys map[semKey]map[string]int64
}

type semKey struct{ name, key string }

// Acquire implements inflight.Semaphore with the store's clock. Acquire,
// Release and Extend fail with ErrClosed after Close, with the context's
// error if it is already done, and for a ttl ≤ 0 or past sluice.MaxPeriod.
func (s *Store) Acquire(ctx context.Context, name, key, holder string, limit int64, ttl time.Duration) (inflight.Slots, error) {
	if err := s.ready(ctx, "acquire", key); err != nil {
		return inflight.Slots{}, err
	}
	if ttl <= 0 || ttl > sluice.MaxPeriod {
		return inflight.Slots{}, fmt.Errorf("memstore: acquire %q: ttl %v: must be positive and at most %v", key, ttl, sluice.MaxPeriod)
	}
	return s.sem.do(s.now(), name, key, func(hs map[string]int64, now int64) bool {
		if _, ok := hs[holder]; ok || int64(len(hs)) < limit {
			hs[holder] = now + int64(ttl)
			return true
		}
		return false
	}), nil
}

// Release implements inflight.Semaphore.
func (s *Store) Release(ctx context.Context, name, key, holder string) (inflight.Slots, error) {
	if err := s.ready(ctx, "release", key); err != nil {
		return inflight.Slots{}, err
	}
	return s.sem.do(s.now(), name, key, func(hs map[string]int64, _ int64) bool {
		_, ok := hs[holder]
		delete(hs, holder)
		return ok
	}), nil
}

// Extend implements inflight.Semaphore.
func (s *Store) Extend(ctx context.Context, name, key, holder string, ttl time.Duration) (inflight.Slots, error) {
	if err := s.ready(ctx, "extend", key); err != nil {
		return inflight.Slots{}, err
	}
	if ttl <= 0 || ttl > sluice.MaxPeriod {
		return inflight.Slots{}, fmt.Errorf("memstore: extend %q: ttl %v: must be positive and at most %v", key, ttl, sluice.MaxPeriod)
	}
	return s.sem.do(s.now(), name, key, func(hs map[string]int64, now int64) bool {
		if _, ok := hs[holder]; ok {
			hs[holder] = now + int64(ttl)
			return true
		}
		return false
	}), nil
}

// ready returns the error of a call of op on key that cannot go on: a
// closed or zero store, or a context that is done; else nil.
func (s *Store) ready(ctx context.Context, op, key string) error {
	switch {
	case s.closed.Load():
		return fmt.Errorf("memstore: %s %q: %w", op, key, ErrClosed)
	case s.clock == nil:
		return fmt.Errorf("memstore: %s %q: %w", op, key, errZero)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %s %q: %w", op, key, err)
	}
	return nil
}

// do drops the expired holders of (name, key) at now, applies f to the
// rest and reports the outcome; a semaphore left empty is dropped.
func (m *semaphores) do(now int64, name, key string, f func(hs map[string]int64, now int64) bool) inflight.Slots {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := semKey{name, key}
	hs := m.keys[k]
	if hs == nil {
		hs = make(map[string]int64)
	}
	for h, e := range hs {
		if e <= now {
			delete(hs, h)
		}
	}
	ok := f(hs, now)
	out := inflight.Slots{Acquired: ok, Held: int64(len(hs))}
	if len(hs) == 0 {
		delete(m.keys, k)
		return out
	}
	if m.keys == nil {
		m.keys = make(map[semKey]map[string]int64)
	}
	m.keys[k] = hs
	first := int64(-1)
	for _, e := range hs {
		if first < 0 || e < first {
			first = e
		}
	}
	out.NextExpiry = time.Duration(first - now)
	return out
}

// sweep drops every expired holder, and the semaphores left empty.
func (m *semaphores) sweep(now int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, hs := range m.keys {
		for h, e := range hs {
			if e <= now {
				delete(hs, h)
			}
		}
		if len(hs) == 0 {
			delete(m.keys, k)
		}
	}
}

// Semaphores returns the number of in-flight semaphores (name, key) the
// store holds now. A semaphore whose holders have all expired counts until
// it is next touched or swept (Sweep, or the background sweeper).
func (s *Store) Semaphores() int {
	s.sem.mu.Lock()
	defer s.sem.mu.Unlock()
	return len(s.sem.keys)
}
