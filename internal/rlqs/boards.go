// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"context"
	"sort"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
)

// BoardFor returns the board that shares divisions through store across
// replicas (a *redisstore.Store: its Shares, ClaimShares and DropShare),
// looking through wrappers that have an Unwrap() sluice.Store method (the
// tracing wrapper), or nil when store cannot (then NewMemoryBoard: one
// replica).
func BoardFor(store sluice.Store) Board {
	for range 8 {
		switch s := store.(type) {
		case *redisstore.Store:
			return RedisBoard(s)
		case interface{ Unwrap() sluice.Store }:
			store = s.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// RedisBoard returns a board in Redis: any number of replicas that share
// the store share its divisions.
func RedisBoard(s *redisstore.Store) Board { return redisBoard{s} }

type redisBoard struct{ s *redisstore.Store }

func (b redisBoard) Read(ctx context.Context, division string, now time.Time) ([]Entry, error) {
	sh, err := b.s.Shares(ctx, division, now)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(sh))
	for i, x := range sh {
		out[i] = Entry{Stream: x.Member, Demand: x.Demand, Grant: x.Grant}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out, nil
}

func (b redisBoard) Claim(ctx context.Context, division string, budget int64, now time.Time, ttl time.Duration, claims []Claim) ([]int64, error) {
	cs := make([]redisstore.ShareClaim, len(claims))
	for i, c := range claims {
		cs[i] = redisstore.ShareClaim{Member: c.Stream, Demand: c.Demand, Want: c.Want}
	}
	return b.s.ClaimShares(ctx, division, budget, now, ttl, cs)
}

func (b redisBoard) Drop(ctx context.Context, division, stream string, before time.Time) error {
	return b.s.DropShare(ctx, division, stream, before)
}
