// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"strings"
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
// DoCache: RESP3 CLIENT TRACKING). A replica asks Redis once per key and
// then answers from its own memory, with no round trip, until Redis tells
// it the key changed: a write sends an invalidation to every replica that
// read the key before it answers the writer, so the next read on any
// replica after a write has returned sees the write, bounded only by the
// invalidation's delivery on the replica's open connection (the same
// network path as the writer's own reply). A connection that breaks drops
// its cache. Redis must speak RESP3 (6.0 and later); a client made with
// DisableCache reads from Redis every time, which is correct but costs a
// round trip per read.

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
// one. It is answered from this process's memory once read (see the
// comment on overrideCacheTTL): the decision path calls it per request.
func (s *Store) Override(ctx context.Context, domain, id string) (spec string, ok bool, err error) {
	if s.closed.Load() {
		return "", false, fmt.Errorf("redisstore: override: %w", errClosed)
	}
	cn, err := s.connection(ctx)
	if err != nil {
		return "", false, fmt.Errorf("redisstore: override: %w", err)
	}
	_, key := s.overrideKeys(domain, id)
	err = s.call(ctx, func(ctx context.Context) error {
		res := cn.client.DoCache(ctx, cn.client.B().Get().Key(key).Cache(), overrideCacheTTL)
		v, err := res.ToString()
		switch {
		case rueidis.IsRedisNil(err):
			return nil
		case err != nil:
			return err
		}
		spec, ok = v, true
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("redisstore: override %q: %w", id, err)
	}
	return spec, ok, nil
}

// SetOverride sets domain's override id to spec, with record the text
// Overrides lists for it, and returns the record it replaced ("" if none).
func (s *Store) SetOverride(ctx context.Context, domain, id, spec, record string) (prev string, err error) {
	prev, err = s.writeOverride(ctx, domain, id, []string{"s", id, spec, record})
	if err != nil {
		return "", fmt.Errorf("redisstore: set override %q: %w", id, err)
	}
	return prev, nil
}

// DeleteOverride deletes domain's override id and returns its record (""
// if there was none).
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
	err = s.call(ctx, func(ctx context.Context) error {
		res := overrideScript.Exec(ctx, cn.client, []string{index, key}, args)
		v, err := res.ToString()
		switch {
		case rueidis.IsRedisNil(err):
			return nil
		case err != nil:
			return err
		}
		prev = v
		return nil
	})
	return prev, err
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
	var rec string
	err = s.call(ctx, func(ctx context.Context) error {
		v, err := cn.client.Do(ctx, cn.client.B().Hget().Key(index).Field(id).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			return nil
		}
		rec = v
		return err
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
	var out map[string]string
	err = s.call(ctx, func(ctx context.Context) error {
		m, err := cn.client.Do(ctx, cn.client.B().Hgetall().Key(index).Build()).AsStrMap()
		out = m
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: overrides of %q: %w", domain, err)
	}
	return out, nil
}
