// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
)

// Defaults of Replicas.
const (
	// DefaultHeartbeatInterval is how often Run beats.
	DefaultHeartbeatInterval = time.Second
	// DefaultHeartbeatTTL is how long a beat keeps a replica counted: a
	// replica that stops beating (it died) leaves the count within it.
	DefaultHeartbeatTTL = 3 * time.Second
)

// heartbeatSource removes the expired members of the sorted set KEYS[1]
// (scored by the millisecond, by Redis TIME, at which each expires), adds or
// refreshes ARGV[1] to expire ARGV[2] ms from now, keeps the set itself
// alive that long, and returns the number of members.
const heartbeatSource = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZCARD', KEYS[1])
`

var heartbeatScript = rueidis.NewLuaScript(heartbeatSource)

// Replicas counts the replicas (processes) that share a Redis, by
// heartbeats in Redis itself: each replica's Beat puts its id in one sorted
// set (prefix{replicas}, or prefix{slot}replicas under WithSingleSlot),
// scored by the instant, by Redis TIME, at which it expires; a beat drops
// the expired ids and counts the rest. Stores with the same prefix on the
// same Redis count together. It is the sluice.ReplicaCounter that gives a
// FailLocal limiter its share of a limit.
//
// While Redis is unreachable the count stays what the last beat saw, so each
// replica keeps its share through an outage. Before the first beat the count
// is 1. The count is the largest a beat saw within the last TTL (by this
// process's clock): it falls no faster than the others' beats expire, so a
// Redis that restarted empty (whose first beat counts only this replica)
// does not hand this replica the whole limit while the others, still
// counting it, keep their shares. A replica that left (Leave) is thus still
// counted, by the others, for up to the TTL: their shares are smaller for
// that long, never larger.
//
// Make one with NewReplicas. The zero Replicas (and a nil *Replicas) counts
// over no store: Replicas is 1, Beat and Leave fail with an error wrapping
// sluice.ErrStoreClosed, and Run reports that error once and returns.
type Replicas struct {
	store    *Store
	id       string
	interval time.Duration
	ttl      time.Duration
	key      string
	n        atomic.Int64

	mu   sync.Mutex
	seen []beatSeen // the counts beats saw within the last TTL, oldest first
}

// beatSeen is a count a beat saw, and when.
type beatSeen struct {
	n  int64
	at time.Time
}

var _ sluice.ReplicaCounter = (*Replicas)(nil)

// errZeroReplicas is every error of the zero Replicas: like a closed
// store's.
var errZeroReplicas = fmt.Errorf("the zero Replicas has no store (make one with NewReplicas): %w", sluice.ErrStoreClosed)

// NewReplicas returns the replica counter of the replica id (unique in the
// fleet: a host name and process id, say) over s, which Run beats every
// interval (DefaultHeartbeatInterval if interval ≤ 0) and whose beats keep
// it counted for ttl (DefaultHeartbeatTTL if ttl ≤ 0).
//
// interval must be shorter than ttl, or a live replica would drop out of
// the count between two beats and the others would take its share of every
// limit: NewReplicas refuses that with an error naming both.
func NewReplicas(s *Store, id string, interval, ttl time.Duration) (*Replicas, error) {
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	if ttl <= 0 {
		ttl = DefaultHeartbeatTTL
	}
	if interval >= ttl {
		return nil, fmt.Errorf("redisstore: replicas: heartbeat interval %v must be shorter than the heartbeat TTL %v (a live replica would drop out of the count between beats)", interval, ttl)
	}
	tag := "replicas"
	key := s.prefix + "{" + tag + "}"
	if s.slot != "" {
		key = s.prefix + "{" + s.slot + "}" + tag
	}
	r := &Replicas{store: s, id: id, interval: interval, ttl: ttl, key: key}
	r.n.Store(1)
	return r, nil
}

// heartbeatCall is the key of a context value that marks the calls of
// Beat and Leave: their deadline is the heartbeat's own, not a caller's
// (Stats.HeartbeatTimeouts).
type heartbeatCall struct{}

// Replicas returns the count the last successful beat saw (at least 1).
func (r *Replicas) Replicas() int {
	if r == nil {
		return 1
	}
	return int(max(r.n.Load(), 1))
}

// Beat counts this replica in for the TTL and returns the number of
// replicas counted in Redis now (Replicas may answer more: the largest
// count of the last TTL). On an error the count stays as it was.
func (r *Replicas) Beat(ctx context.Context) (int, error) {
	if r == nil || r.store == nil {
		return 1, fmt.Errorf("redisstore: heartbeat: %w", errZeroReplicas)
	}
	s := r.store
	ctx = context.WithValue(ctx, heartbeatCall{}, true)
	if s.closed.Load() {
		return r.Replicas(), fmt.Errorf("redisstore: heartbeat: %w", errClosed)
	}
	cn, err := s.connection(ctx)
	if err != nil {
		return r.Replicas(), fmt.Errorf("redisstore: heartbeat: %w", err)
	}
	n, err := callV(s, ctx, func(ctx context.Context) (int64, error) {
		return heartbeatScript.Exec(ctx, cn.client, []string{r.key}, []string{r.id, fmt.Sprint(r.ttl.Milliseconds())}).AsInt64()
	})
	if err != nil {
		return r.Replicas(), fmt.Errorf("redisstore: heartbeat: %w", err)
	}
	r.n.Store(r.record(n, time.Now()))
	return int(n), nil
}

// record adds a count a beat saw at now and returns the largest seen within
// the last TTL (at least 1).
func (r *Replicas) record(n int64, now time.Time) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	keep := r.seen[:0]
	for _, b := range r.seen {
		if now.Sub(b.at) < r.ttl {
			keep = append(keep, b)
		}
	}
	r.seen = append(keep, beatSeen{n: n, at: now})
	most := int64(1)
	for _, b := range r.seen {
		most = max(most, b.n)
	}
	return most
}

// Leave removes this replica from the count at once (on a graceful
// shutdown), instead of when its last beat expires.
func (r *Replicas) Leave(ctx context.Context) error {
	if r == nil || r.store == nil {
		return fmt.Errorf("redisstore: heartbeat: leave: %w", errZeroReplicas)
	}
	s := r.store
	ctx = context.WithValue(ctx, heartbeatCall{}, true)
	if s.closed.Load() {
		return fmt.Errorf("redisstore: heartbeat: leave: %w", errClosed)
	}
	cn := s.conn.Load()
	if cn == nil {
		return nil // never connected: never counted
	}
	err := s.call(ctx, func(ctx context.Context) error {
		return cn.client.Do(ctx, cn.client.B().Zrem().Key(r.key).Member(r.id).Build()).Error()
	})
	if err != nil {
		return fmt.Errorf("redisstore: heartbeat: leave: %w", err)
	}
	return nil
}

// Run beats at once and then every interval (NewReplicas's), until ctx
// ends, then leaves. Each beat waits at most min(interval, TTL − interval),
// so that a beat that succeeds lands before the previous one expires.
// Failed beats are skipped (the count stays); onError, if not nil, is
// called with each error.
func (r *Replicas) Run(ctx context.Context, onError func(error)) {
	if r == nil || r.store == nil {
		if _, err := r.Beat(ctx); onError != nil {
			onError(err)
		}
		return
	}
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		bctx, cancel := context.WithTimeout(ctx, min(r.interval, r.ttl-r.interval))
		_, err := r.Beat(bctx)
		cancel()
		if err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			r.Leave(lctx)
			return
		case <-tick.C:
		}
	}
}
