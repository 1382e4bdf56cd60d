// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	_ "embed" // the semaphore script
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
)

//go:embed semaphore.lua
var semaphoreSource string

var semaphoreScript = rueidis.NewLuaScript(semaphoreSource)

var _ inflight.Semaphore = (*Store)(nil)

// Acquire implements inflight.Semaphore: one script, on one sorted set of
// holder ids scored by expiry (see semaphore.lua). The time is Redis TIME,
// or the store's clock with WithClock (then the key stays in Redis for the
// expiry slack beyond its last holder's expiry).
func (s *Store) Acquire(ctx context.Context, name, key, holder string, limit int64, ttl time.Duration) (inflight.Slots, error) {
	if ttl <= 0 || ttl > sluice.MaxPeriod {
		return inflight.Slots{}, fmt.Errorf("redisstore: acquire %q: ttl %v: must be positive and at most %v", key, ttl, sluice.MaxPeriod)
	}
	sl, err := s.semaphore(ctx, "a", name, key, holder, strconv.FormatInt(max(limit, 0), 10), micros(ttl))
	if err != nil {
		return sl, fmt.Errorf("redisstore: acquire %q: %w", key, err)
	}
	return sl, nil
}

// Release implements inflight.Semaphore.
func (s *Store) Release(ctx context.Context, name, key, holder string) (inflight.Slots, error) {
	sl, err := s.semaphore(ctx, "r", name, key, holder, "0", "0")
	if err != nil {
		return sl, fmt.Errorf("redisstore: release %q: %w", key, err)
	}
	return sl, nil
}

// Extend implements inflight.Semaphore.
func (s *Store) Extend(ctx context.Context, name, key, holder string, ttl time.Duration) (inflight.Slots, error) {
	if ttl <= 0 || ttl > sluice.MaxPeriod {
		return inflight.Slots{}, fmt.Errorf("redisstore: extend %q: ttl %v: must be positive and at most %v", key, ttl, sluice.MaxPeriod)
	}
	sl, err := s.semaphore(ctx, "e", name, key, holder, "0", micros(ttl))
	if err != nil {
		return sl, fmt.Errorf("redisstore: extend %q: %w", key, err)
	}
	return sl, nil
}

// micros is d in whole microseconds, rounded up.
func micros(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Microsecond-1)/time.Microsecond), 10)
}

// semaphoreKey is the sorted set of (name, key): prefix{c:name:key}, or
// prefix{slot}c:name:key with WithSingleSlot. The escaping makes it
// injective, and ':' is always escaped.
func semaphoreKey(prefix, slot, name, key string) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(slot) + 8 + len(name) + len(key))
	b.WriteString(prefix)
	b.WriteByte('{')
	if slot != "" {
		b.WriteString(slot)
		b.WriteByte('}')
	}
	b.WriteString("c:")
	_, hashed := escapedLen(name)
	writeEscaped(&b, name, hashed)
	b.WriteByte(':')
	_, hashed = escapedLen(key)
	writeEscaped(&b, key, hashed)
	if slot == "" {
		b.WriteByte('}')
	}
	return b.String()
}

func (s *Store) semaphore(ctx context.Context, op, name, key, holder, limit, ttl string) (inflight.Slots, error) {
	if s.closed.Load() {
		return inflight.Slots{}, errClosed
	}
	cn, err := s.connection(ctx)
	if err != nil {
		return inflight.Slots{}, err
	}
	now := ""
	if s.clock != nil {
		now = strconv.FormatInt(max(s.clock.Now().UnixNano(), 0)/1000, 10)
	}
	keys := []string{semaphoreKey(s.prefix, s.slot, name, key)}
	args := []string{op, now, s.ttlArg, holder, limit, ttl}
	callCtx, c, err := s.begin(ctx)
	if err != nil {
		return inflight.Slots{}, err
	}
	reply, err := semaphoreScript.Exec(callCtx, cn.client, keys, args).ToArray()
	if err := s.end(ctx, c, err); err != nil {
		return inflight.Slots{}, err
	}
	if len(reply) != 3 {
		return inflight.Slots{}, fmt.Errorf("semaphore script returned %d values, want 3", len(reply))
	}
	var v [3]int64
	for i := range v {
		if v[i], err = reply[i].AsInt64(); err != nil {
			return inflight.Slots{}, fmt.Errorf("semaphore script returned value %d: %v", i, err)
		}
	}
	return inflight.Slots{Acquired: v[0] == 1, Held: v[1], NextExpiry: time.Duration(v[2]) * time.Microsecond}, nil
}
