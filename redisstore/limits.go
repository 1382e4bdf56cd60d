// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Limit overrides: sluice serve's per-key limits set at runtime (PUT
// /v1/limits/...), kept in Redis so that every replica on one Redis applies
// the same one.
//
// Each override of a domain is two records in one hash slot: the string
// prefix{o:domain}:id, the spec the decision path reads (an opaque string
// of the caller's), and the field id of the hash prefix{o:domain}, a
// record for listing (the spec with who set it and when, also the
// caller's). A script writes both at once. Neither expires: an override
// lasts until it is deleted.
//
// The decision path reads the spec with client-side caching (rueidis's
// DoCache: RESP3 CLIENT TRACKING): a replica asks Redis once per key and
// then answers from its own memory until Redis tells it the key changed.
// Redis sends that invalidation on the replica's own connection when the
// write runs, so it is applied before the reply to any command the replica
// sent on that connection after the write ran. Override uses this for a
// strict guarantee at no cost per decision:
//
//   - SetOverride and DeleteOverride return OverrideSettle after Redis has
//     run the write.
//   - Override answers from the cache only once a round trip on the
//     override's connection (an EXISTS on the domain's hash, so the node
//     that holds the override) sent at most OverrideSettle before the call
//     has completed; if none has, it makes one (concurrent calls share it).
//
// So an Override that begins after a SetOverride returned sees the new spec
// on every Store sharing the Redis: its barrier round trip was sent after
// the write ran, and the invalidation came before its reply. A busy replica
// makes one barrier round trip per OverrideSettle (20 a second, whatever
// the decision rate); an idle one pays one round trip on its first read
// after OverrideSettle of quiet. A connection that breaks drops its cache.
// Redis must speak RESP3 (6.0 and later); a client made with DisableCache
// reads from Redis every time, which is as correct.

// OverrideSettle is how long SetOverride and DeleteOverride wait after
// Redis has run the write, and the age of the barrier round trip Override
// needs: see the comment above.
const OverrideSettle = 50 * time.Millisecond

// freshness is the barrier of Override: per domain, the send time of the
// latest barrier round trip completed, and the one in flight.
type freshness struct {
	mu      sync.Mutex
	domains map[string]*barrier
}

type barrier struct {
	done     time.Time // the send time of the latest completed barrier
	inflight *barrierCall
}

type barrierCall struct {
	sent time.Time
	done chan struct{}
	err  error
}

// maxBarrierDomains bounds the domains freshness tracks; past it, it
// starts again (a domain forgotten pays one round trip).
const maxBarrierDomains = 1024

// barrier returns once a round trip on the connection of domain's
// overrides (index, its hash), sent no earlier than OverrideSettle before
// now, has completed.
func (s *Store) barrier(ctx context.Context, cn *conn, domain, index string) error {
	now := time.Now()
	floor := now.Add(-OverrideSettle)
	f := &s.fresh
	f.mu.Lock()
	if f.domains == nil || len(f.domains) >= maxBarrierDomains {
		f.domains = map[string]*barrier{}
	}
	b := f.domains[domain]
	if b == nil {
		b = &barrier{}
		f.domains[domain] = b
	}
	if !b.done.Before(floor) {
		f.mu.Unlock()
		return nil
	}
	c := b.inflight
	if c == nil || c.sent.Before(floor) {
		c = &barrierCall{sent: time.Now(), done: make(chan struct{})}
		b.inflight = c
		f.mu.Unlock()
		// The call is every waiter's, so neither its initiator's
		// cancellation nor its deadline ends it (the store's timeout
		// does); the initiator stops waiting below, as the others do.
		go func() {
			c.err = s.call(context.WithoutCancel(ctx), func(ctx context.Context) error {
				return cn.client.Do(ctx, cn.client.B().Exists().Key(index).Build()).Error()
			})
			f.mu.Lock()
			if c.err == nil && c.sent.After(b.done) {
				b.done = c.sent
			}
			if b.inflight == c {
				b.inflight = nil
			}
			f.mu.Unlock()
			close(c.done)
		}()
	} else {
		f.mu.Unlock()
	}
	// Wait as a call would (begin): until the caller's deadline less the
	// margin, so that the failure mode still answers in time.
	bound, stop := s.waitBound(ctx)
	defer stop()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	case <-bound:
		s.stats.callerTimeouts.Add(1)
		return context.DeadlineExceeded
	}
}

// overrideCacheTTL is how long a replica keeps a spec it read without
// hearing that it changed (invalidations make it exact earlier; the TTL
// only bounds how long an entry nobody reads stays in memory).
const overrideCacheTTL = 10 * time.Minute

// overrideSource writes (ARGV[1] "s": set the spec ARGV[3] and the record
// ARGV[4]) or deletes ("d") the override ARGV[2], whose spec string is
// KEYS[2], in the hash KEYS[1]. It returns the record it replaced, or
// false.
const overrideSource = `
local prev = redis.call('HGET', KEYS[1], ARGV[2])
if ARGV[1] == 's' then
  redis.call('SET', KEYS[2], ARGV[3])
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
else
  redis.call('DEL', KEYS[2])
  redis.call('HDEL', KEYS[1], ARGV[2])
end
return prev
`

var overrideScript = rueidis.NewLuaScript(overrideSource)

// overrideKeys returns the hash of domain's overrides and the spec string
// of override id: prefix{o:domain} and prefix{o:domain}:id, or with
// WithSingleSlot prefix{slot}o:domain and prefix{slot}o:domain:id.
func (s *Store) overrideKeys(domain, id string) (index, spec string) {
	var b strings.Builder
	b.WriteString(s.prefix)
	b.WriteByte('{')
	if s.slot != "" {
		b.WriteString(s.slot)
		b.WriteByte('}')
	}
	b.WriteString("o:")
	_, hashed := escapedLen(domain)
	writeEscaped(&b, domain, hashed)
	if s.slot == "" {
		b.WriteByte('}')
	}
	index = b.String()
	if id == "" {
		return index, ""
	}
	b.WriteByte(':')
	_, hashed = escapedLen(id)
	writeEscaped(&b, id, hashed)
	return index, b.String()
}

// Override returns the spec of domain's override id, and whether there is
// one, as of no earlier than the call: it sees every SetOverride and
// DeleteOverride that returned before it began, on any Store sharing the
// Redis. It is answered from this process's memory once read, behind a
// barrier round trip at most every OverrideSettle (see OverrideSettle):
// the decision path calls it per request.
func (s *Store) Override(ctx context.Context, domain, id string) (spec string, ok bool, err error) {
	if s.closed.Load() {
		return "", false, fmt.Errorf("redisstore: override: %w", errClosed)
	}
	cn, err := s.connection(ctx)
	if err != nil {
		return "", false, fmt.Errorf("redisstore: override: %w", err)
	}
	index, key := s.overrideKeys(domain, id)
	if err := s.barrier(ctx, cn, domain, index); err != nil {
		return "", false, fmt.Errorf("redisstore: override %q: %w", id, err)
	}
	got, err := callNow(s, ctx, func(ctx context.Context) (*string, error) {
		res := cn.client.DoCache(ctx, cn.client.B().Get().Key(key).Cache(), overrideCacheTTL)
		v, err := res.ToString()
		switch {
		case rueidis.IsRedisNil(err):
			return nil, nil
		case err != nil:
			return nil, err
		}
		return &v, nil
	})
	if err != nil {
		return "", false, fmt.Errorf("redisstore: override %q: %w", id, err)
	}
	if got == nil {
		return "", false, nil
	}
	return *got, true, nil
}

// SetOverride sets domain's override id to spec, with record the text
// Overrides lists for it, and returns the record it replaced ("" if none).
// It returns OverrideSettle after Redis has run the write (or when ctx
// ends, with ctx's error, the write done): from then on Override on every
// Store sharing the Redis returns spec.
func (s *Store) SetOverride(ctx context.Context, domain, id, spec, record string) (prev string, err error) {
	prev, err = s.writeOverride(ctx, domain, id, []string{"s", id, spec, record})
	if err != nil {
		return "", fmt.Errorf("redisstore: set override %q: %w", id, err)
	}
	return prev, nil
}

// DeleteOverride deletes domain's override id and returns its record (""
// if there was none). It waits as SetOverride does.
func (s *Store) DeleteOverride(ctx context.Context, domain, id string) (prev string, err error) {
	prev, err = s.writeOverride(ctx, domain, id, []string{"d", id})
	if err != nil {
		return "", fmt.Errorf("redisstore: delete override %q: %w", id, err)
	}
	return prev, nil
}

func (s *Store) writeOverride(ctx context.Context, domain, id string, args []string) (prev string, err error) {
	if s.closed.Load() {
		return "", errClosed
	}
	cn, err := s.connection(ctx)
	if err != nil {
		return "", err
	}
	index, key := s.overrideKeys(domain, id)
	prev, err = callV(s, ctx, func(ctx context.Context) (string, error) {
		v, err := overrideScript.Exec(ctx, cn.client, []string{index, key}, args).ToString()
		if rueidis.IsRedisNil(err) {
			return "", nil
		}
		return v, err
	})
	if err != nil {
		return "", err
	}
	t := time.NewTimer(OverrideSettle)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return prev, ctx.Err()
	}
	return prev, nil
}

// OverrideRecord returns the record of domain's override id ("" if none).
func (s *Store) OverrideRecord(ctx context.Context, domain, id string) (string, error) {
	if s.closed.Load() {
		return "", fmt.Errorf("redisstore: override record: %w", errClosed)
	}
	cn, err := s.connection(ctx)
	if err != nil {
		return "", fmt.Errorf("redisstore: override record: %w", err)
	}
	index, _ := s.overrideKeys(domain, "")
	rec, err := callV(s, ctx, func(ctx context.Context) (string, error) {
		v, err := cn.client.Do(ctx, cn.client.B().Hget().Key(index).Field(id).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			return "", nil
		}
		return v, err
	})
	if err != nil {
		return "", fmt.Errorf("redisstore: override record %q: %w", id, err)
	}
	return rec, nil
}

// Overrides returns the records of every override of domain, by id.
func (s *Store) Overrides(ctx context.Context, domain string) (map[string]string, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("redisstore: overrides: %w", errClosed)
	}
	cn, err := s.connection(ctx)
	if err != nil {
		return nil, fmt.Errorf("redisstore: overrides: %w", err)
	}
	index, _ := s.overrideKeys(domain, "")
	out, err := callV(s, ctx, func(ctx context.Context) (map[string]string, error) {
		return cn.client.Do(ctx, cn.client.B().Hgetall().Key(index).Build()).AsStrMap()
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: overrides of %q: %w", domain, err)
	}
	return out, nil
}
