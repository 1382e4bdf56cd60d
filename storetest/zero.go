// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/shard"
)

// ZeroStore checks the zero value of a Store type S, as a caller who
// skipped its constructor meets it: every exported method of *S, called
// on a fresh zero S, neither panics nor admits, and fails with an error
// wrapping sluice.ErrStoreClosed, except Close, ShardKey (which has no
// error: it answers key~i) and the methods named in noError, which answer
// nil (their other results are checked by their calls). A fail-open
// Limiter over a zero S refuses.
//
// ZeroStore calls the methods of sluice.Store and of the capabilities it
// knows (sluice.Binder, sluice.Refunder, lease.Giver, shard.Keyer,
// inflight.Semaphore) itself; calls holds one call for each other exported method of *S, which
// returns the method's error. ZeroStore fails for an exported method with
// no call.
func ZeroStore[S any](t *testing.T, calls map[string]func(s *S) error, noError ...string) {
	t.Helper()
	ctx := context.Background()
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	refused := func(method string, d sluice.Decision) {
		if d.Allowed {
			t.Errorf("%s on the zero store admitted: %+v", method, d)
		}
	}
	known := map[string]func(s any) error{
		"Take": func(s any) error {
			d, err := s.(sluice.Store).Take(ctx, p, "k", 1)
			refused("Take", d)
			return err
		},
		"TakeAll": func(s any) error {
			out := make([]sluice.Decision, 1)
			err := s.(sluice.Store).TakeAll(ctx, []sluice.Request{{Policy: p, Key: "k", Cost: 1}}, out)
			refused("TakeAll", out[0])
			return err
		},
		"Reset": func(s any) error { return s.(sluice.Store).Reset(ctx, p, "k") },
		"Close": func(s any) error { return s.(sluice.Store).Close() },
		"Bind": func(s any) error {
			_, err := s.(sluice.Binder).Bind(p)
			return err
		},
		"TakeRefundable": func(s any) error {
			d, _, err := s.(sluice.Refunder).TakeRefundable(ctx, p, "k", 1)
			refused("TakeRefundable", d)
			return err
		},
		"Refund": func(s any) error {
			// A stamp that is not the store's own (none) fails the same.
			if _, err := s.(sluice.Refunder).Refund(ctx, p, "k", nil, 1); !errors.Is(err, sluice.ErrStoreClosed) {
				t.Errorf("Refund with no stamp on the zero store: %v, want an error wrapping sluice.ErrStoreClosed", err)
			}
			_, err := s.(sluice.Refunder).Refund(ctx, p, "k", model.State{}, 1)
			return err
		},
		"TakeStamped": func(s any) error {
			d, _, err := s.(lease.Giver).TakeStamped(ctx, p, "k", 1)
			refused("TakeStamped", d)
			return err
		},
		"Give": func(s any) error {
			_, err := s.(lease.Giver).Give(ctx, p, "k", model.State{}, 1)
			return err
		},
		"Acquire": func(s any) error {
			sl, err := s.(inflight.Semaphore).Acquire(ctx, "c", "k", "h", 1, time.Second)
			if sl.Acquired {
				t.Errorf("Acquire on the zero store acquired: %+v", sl)
			}
			return err
		},
		"Release": func(s any) error {
			_, err := s.(inflight.Semaphore).Release(ctx, "c", "k", "h")
			return err
		},
		"Extend": func(s any) error {
			_, err := s.(inflight.Semaphore).Extend(ctx, "c", "k", "h", time.Second)
			return err
		},
		"ShardKey": func(s any) error {
			if k := s.(shard.Keyer).ShardKey(p, "k", 1, 2); k != "k~1" {
				t.Errorf("ShardKey on the zero store = %q, want %q (the neutral answer)", k, "k~1")
			}
			return nil
		},
	}
	// Which capability each known method belongs to: it is called only
	// when *S has the whole capability (lease.Store's Release is not a
	// semaphore's).
	capability := map[string]reflect.Type{
		"Take": storeType, "TakeAll": storeType, "Reset": storeType, "Close": storeType,
		"Bind":           reflect.TypeFor[sluice.Binder](),
		"TakeRefundable": reflect.TypeFor[sluice.Refunder](), "Refund": reflect.TypeFor[sluice.Refunder](),
		"TakeStamped": reflect.TypeFor[lease.Giver](), "Give": reflect.TypeFor[lease.Giver](),
		"Acquire": semaphoreType, "Release": semaphoreType, "Extend": semaphoreType,
		"ShardKey": reflect.TypeFor[shard.Keyer](),
	}
	typ := reflect.TypeFor[*S]()
	if !typ.Implements(storeType) {
		t.Fatalf("storetest.ZeroStore: %v is not a sluice.Store", typ)
	}
	all := map[string]func(s *S) error{}
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		if c := calls[name]; c != nil {
			all[name] = c
		} else if k, c := known[name], capability[name]; k != nil && typ.Implements(c) {
			all[name] = func(s *S) error { return k(s) }
		} else {
			t.Errorf("storetest.ZeroStore: method %s of %v has no call", name, typ)
		}
	}
	for name, call := range all {
		t.Run(name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s on the zero %v panicked: %v", name, typ.Elem(), r)
					}
				}()
				err = call(new(S))
			}()
			if name == "Close" || name == "ShardKey" || slices.Contains(noError, name) {
				if err != nil {
					t.Errorf("%s: %v, want nil", name, err)
				}
			} else if !errors.Is(err, sluice.ErrStoreClosed) {
				t.Errorf("%s: %v, want an error wrapping sluice.ErrStoreClosed", name, err)
			}
		})
	}
	l, err := sluice.NewLimiter(any(new(S)).(sluice.Store), p, sluice.WithFailureMode(sluice.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(ctx, "k"); d.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
		t.Errorf("a fail-open Limiter over the zero %v: %+v, %v; want refused with sluice.ErrStoreClosed", typ.Elem(), d, err)
	}
}

var (
	storeType     = reflect.TypeFor[sluice.Store]()
	semaphoreType = reflect.TypeFor[inflight.Semaphore]()
)
