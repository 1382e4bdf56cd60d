// SPDX-License-Identifier: Apache-2.0

package redisstore_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/redisstore"
)

// TestZeroStore: every exported method of the zero Store answers without
// panicking (Take wrote to its nil map of policies, Ping dereferenced its
// nil dialer): those with an error fail with one wrapping
// sluice.ErrStoreClosed, Stats is zero, Close does nothing, and ShardKey
// still names a key. A Limiter over it refuses, fail-open too. It needs no
// Redis.
func TestZeroStore(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	reqs := []sluice.Request{{Policy: p, Key: "k", Cost: 1}}
	// Each call returns the method's error (nil for one without).
	calls := map[string]func(s *redisstore.Store) error{
		"Take": func(s *redisstore.Store) error {
			d, err := s.Take(ctx, p, "k", 1)
			if d.Allowed {
				t.Errorf("Take admitted: %+v", d)
			}
			return err
		},
		"TakeAll": func(s *redisstore.Store) error {
			if err := s.TakeAll(ctx, nil, nil); !errors.Is(err, sluice.ErrStoreClosed) {
				t.Errorf("TakeAll of no request: %v, want an error wrapping sluice.ErrStoreClosed", err)
			}
			return s.TakeAll(ctx, reqs, make([]sluice.Decision, 1))
		},
		"Reset": func(s *redisstore.Store) error { return s.Reset(ctx, p, "k") },
		"TakeStamped": func(s *redisstore.Store) error {
			d, _, err := s.TakeStamped(ctx, p, "k", 1)
			if d.Allowed {
				t.Errorf("TakeStamped admitted: %+v", d)
			}
			return err
		},
		"Give": func(s *redisstore.Store) error {
			_, err := s.Give(ctx, p, "k", model.State{}, 1)
			return err
		},
		"TakeRefundable": func(s *redisstore.Store) error {
			d, _, err := s.TakeRefundable(ctx, p, "k", 1)
			if d.Allowed {
				t.Errorf("TakeRefundable admitted: %+v", d)
			}
			return err
		},
		"Refund": func(s *redisstore.Store) error {
			_, err := s.Refund(ctx, p, "k", model.State{}, 1)
			return err
		},
		"Ping": func(s *redisstore.Store) error { return s.Ping(ctx) },
		"Acquire": func(s *redisstore.Store) error {
			sl, err := s.Acquire(ctx, "c", "k", "h", 1, time.Second)
			if sl.Acquired {
				t.Errorf("Acquire acquired: %+v", sl)
			}
			return err
		},
		"Release": func(s *redisstore.Store) error {
			_, err := s.Release(ctx, "c", "k", "h")
			return err
		},
		"Extend": func(s *redisstore.Store) error {
			_, err := s.Extend(ctx, "c", "k", "h", time.Second)
			return err
		},
		"Shares": func(s *redisstore.Store) error {
			_, err := s.Shares(ctx, "d", time.Unix(0, 0))
			return err
		},
		"ClaimShares": func(s *redisstore.Store) error {
			_, err := s.ClaimShares(ctx, "d", 10, time.Unix(0, 0), time.Second, []redisstore.ShareClaim{{Member: "m", Demand: 1, Want: 1}})
			return err
		},
		"DropShare": func(s *redisstore.Store) error { return s.DropShare(ctx, "d", "m") },
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
		"Close": func(s *redisstore.Store) error { return s.Close() },
	}
	noError := []string{"Stats", "ShardKey", "Close"}
	typ := reflect.TypeFor[*redisstore.Store]()
	for i := range typ.NumMethod() {
		if name := typ.Method(i).Name; calls[name] == nil {
			t.Errorf("method %s is not in the table", name)
		}
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var s redisstore.Store
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s on the zero Store panicked: %v", name, r)
					}
				}()
				err = call(&s)
			}()
			if slices.Contains(noError, name) {
				if err != nil {
					t.Errorf("%s: %v, want nil", name, err)
				}
			} else if !errors.Is(err, sluice.ErrStoreClosed) {
				t.Errorf("%s: %v, want an error wrapping sluice.ErrStoreClosed", name, err)
			}
		})
	}
	var s redisstore.Store
	l, err := sluice.NewLimiter(&s, p, sluice.WithFailureMode(sluice.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(ctx, "k"); d.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
		t.Errorf("a fail-open Limiter over the zero Store: %+v, %v; want refused with sluice.ErrStoreClosed", d, err)
	}
}
