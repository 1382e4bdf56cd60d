// SPDX-License-Identifier: Apache-2.0

package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storetest"
)

// TestZeroStore: every exported method of the zero Store answers without
// panicking (Take wrote to its nil map of policies, Ping dereferenced its
// nil dialer): Stats is zero, ShardKey still names a key, and a Limiter
// over it refuses, fail-open too. It needs no Redis.
func TestZeroStore(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	storetest.ZeroStore(t, map[string]func(s *redisstore.Store) error{
		"TakeAll": func(s *redisstore.Store) error {
			if err := s.TakeAll(ctx, nil, nil); !errors.Is(err, sluice.ErrStoreClosed) {
				t.Errorf("TakeAll of no request: %v, want an error wrapping sluice.ErrStoreClosed", err)
			}
			return s.TakeAll(ctx, []sluice.Request{{Policy: p, Key: "k", Cost: 1}}, make([]sluice.Decision, 1))
		},
		"Ping": func(s *redisstore.Store) error { return s.Ping(ctx) },
		"Shares": func(s *redisstore.Store) error {
			_, err := s.Shares(ctx, "d", time.Unix(0, 0))
			return err
		},
		"ClaimShares": func(s *redisstore.Store) error {
			_, err := s.ClaimShares(ctx, "d", 10, time.Unix(0, 0), time.Second, []redisstore.ShareClaim{{Member: "m", Demand: 1, Want: 1}})
			return err
		},
		"DropShare": func(s *redisstore.Store) error { return s.DropShare(ctx, "d", "m", time.Now()) },
		"Override": func(s *redisstore.Store) error {
			_, _, err := s.Override(ctx, "d", "id")
			return err
		},
		"SetOverride": func(s *redisstore.Store) error {
			_, err := s.SetOverride(ctx, "d", "id", "spec", "record")
			return err
		},
		"DeleteOverride": func(s *redisstore.Store) error {
			_, err := s.DeleteOverride(ctx, "d", "id")
			return err
		},
		"OverrideRecord": func(s *redisstore.Store) error {
			_, err := s.OverrideRecord(ctx, "d", "id")
			return err
		},
		"Overrides": func(s *redisstore.Store) error {
			_, err := s.Overrides(ctx, "d")
			return err
		},
		"Stats": func(s *redisstore.Store) error {
			if st := s.Stats(); st != (redisstore.Stats{}) {
				t.Errorf("Stats = %+v, want zero", st)
			}
			return nil
		},
		"ShardKey": func(s *redisstore.Store) error {
			if a, b := s.ShardKey(p, "k", 0, 2), s.ShardKey(p, "k", 1, 2); a == b {
				t.Errorf("ShardKey gives shards 0 and 1 one key, %q", a)
			}
			return nil
		},
	}, "Stats", "ShardKey")
}
