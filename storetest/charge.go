// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// charge runs one charge (a forced request, sluice.Request.Force) on the
// store and on the model and fails unless their decisions are equal.
func (r *rig) charge(p sluice.Policy, key string, cost int64) sluice.Decision {
	r.t.Helper()
	got, _ := r.checkAll([]sluice.Request{{Policy: p, Key: key, Cost: cost, Force: true}})
	return got[0]
}

// testCharge checks charges (costs recorded past the limit: debt) against
// the model: Envoy's check-then-debit pattern, random takes and charges,
// charges in batches, the caps, expiry of a key in debt, and charges raced
// from many goroutines.
func testCharge(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, alg := range sluice.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			t.Run("CheckThenDebit", func(t *testing.T) {
				// 1000 tokens a minute, a peek before each request and
				// a debit of 300 after it: exactly 4 pass.
				r := newRig(t, newHarness, later)
				p := policyFor(alg, 1000, time.Minute, 1000)
				passed := 0
				for range 10 {
					if !r.peek(p, "tenant").Allowed {
						break
					}
					passed++
					r.charge(p, "tenant", 300)
				}
				if passed != 4 {
					t.Fatalf("%d checks passed, want 4", passed)
				}
				// The debt is paid back: one unit passes again, exactly
				// when the refused peek said.
				d := r.peek(p, "tenant")
				r.at(r.now + int64(d.RetryAfter) - 1)
				if r.peek(p, "tenant").Allowed {
					t.Fatal("a unit passes before RetryAfter")
				}
				r.at(r.now + 1)
				if !r.check(p, "tenant", 1).Allowed {
					t.Fatal("a unit is refused at RetryAfter")
				}
			})
			t.Run("Random", func(t *testing.T) {
				r := newRig(t, newHarness, later)
				p := policyFor(alg, 10, time.Second, 15)
				rng := rand.New(rand.NewPCG(uint64(len(alg)), 23))
				for range 300 {
					r.at(r.now + rng.Int64N(int64(300*time.Millisecond)))
					key := []string{"a", "b"}[rng.IntN(2)]
					if rng.IntN(3) == 0 {
						r.charge(p, key, rng.Int64N(40))
					} else {
						r.check(p, key, rng.Int64N(5))
					}
				}
			})
			t.Run("Batch", func(t *testing.T) {
				r := newRig(t, newHarness, later)
				p := policyFor(alg, 5, time.Minute, 5)
				q := sluice.Policy{Name: "other", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute}
				// A charge beside an admitted take is recorded with it.
				r.checkAll([]sluice.Request{{Policy: p, Key: "k", Cost: 4, Force: true}, req(q, "k", 1)})
				// Beside a refused take, it is not recorded, and reports
				// the state unchanged.
				if _, ok := r.checkAll([]sluice.Request{{Policy: p, Key: "k", Cost: 9, Force: true}, req(q, "k", 1)}); ok {
					t.Fatal("a batch with a refused take was admitted")
				}
				// A charge before a take of the same key in one batch
				// refuses the take.
				if _, ok := r.checkAll([]sluice.Request{{Policy: p, Key: "j", Cost: 5, Force: true}, req(p, "j", 1)}); ok {
					t.Fatal("a take after a charge of the whole limit was admitted")
				}
				r.peek(p, "j")
				r.charge(p, "j", 0) // a charge of 0 is a peek
			})
			t.Run("Caps", func(t *testing.T) {
				r := newRig(t, newHarness, later)
				p := policyFor(alg, 1000, time.Hour, 1000)
				for range 3 {
					r.charge(p, "huge", math.MaxInt64)
				}
				r.check(p, "huge", 1)
				r.at(r.now + int64(50*365*24*time.Hour))
				r.check(p, "huge", 1)
			})
			t.Run("Expiry", func(t *testing.T) {
				r := newRig(t, newHarness, later)
				p := policyFor(alg, 10, time.Second, 10)
				r.charge(p, "debtor", 35)
				x := r.o.expiresAt(p, "debtor")
				r.at(x - 1)
				r.wantLen(1, "a key in debt, 1ns before it is idle")
				r.at(x)
				r.wantLen(0, "a key in debt, once idle")
				r.check(p, "debtor", 10)
			})
			t.Run("Concurrent", func(t *testing.T) {
				// Charges and takes raced from many goroutines at one
				// instant add up exactly: the state is the model's after
				// one charge of the total charged and admitted, and no
				// take is admitted once the charges and takes before it
				// reach the limit.
				r := newRig(t, newHarness, later)
				p := policyFor(alg, 1000, time.Hour, 1000)
				const goroutines, each, cost = 16, 25, 7
				var (
					wg       sync.WaitGroup
					mu       sync.Mutex
					admitted int64
				)
				errs := make(chan error, goroutines)
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						out := make([]sluice.Decision, 1)
						for range each {
							if g%2 == 1 { // a take of 5
								d, err := r.h.Store.Take(r.ctx, p, "shared", 5)
								if err != nil {
									errs <- err
									return
								}
								if d.Allowed {
									mu.Lock()
									admitted += 5
									mu.Unlock()
								}
								continue
							}
							reqs := []sluice.Request{{Policy: p, Key: "shared", Cost: cost, Force: true}}
							if err := r.h.Store.TakeAll(r.ctx, reqs, out); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				const charged = goroutines / 2 * each * cost
				if admitted > 1000 {
					t.Fatalf("%d units of takes admitted, over the limit of 1000", admitted)
				}
				r.o.takeAll([]sluice.Request{{Policy: p, Key: "shared", Cost: charged + admitted, Force: true}}, r.now)
				r.peek(p, "shared")
				r.at(r.now + int64(time.Minute))
				r.peek(p, "shared")
			})
		})
	}
}

// Charges drives h's store with a sequence of takes, charges and two-request
// batches decoded from ops, on a policy of algorithm alg (an index into
// sluice.Algorithms), and fails unless every decision equals the model's.
// It is the body of the stores' FuzzCharge: a store agrees with the model
// under any sequence of takes and charges.
func Charges(t *testing.T, h Harness, alg uint8, ops []byte) {
	t.Helper()
	if h.Store == nil || h.Clock == nil {
		t.Fatal("storetest: the harness has no Store or no Clock")
	}
	r := &rig{t: t, h: h, ctx: t.Context(), o: newOracle(t)}
	r.at(later)
	a := sluice.Algorithms()[int(alg)%len(sluice.Algorithms())]
	p := policyFor(a, 10, time.Second, 15)
	if len(ops) > 300 {
		ops = ops[:300]
	}
	for i := 0; i+1 < len(ops); i += 2 {
		step, c := ops[i], ops[i+1]
		switch {
		case step < 0x40:
		case step < 0x80:
			r.at(r.now + int64(step&7))
		case step < 0xc0:
			r.at(r.now + int64(step&0x3f)*int64(time.Second)/64)
		default:
			r.at(r.now + int64(step&1+1)*int64(time.Second))
		}
		key := []string{"a", "b"}[step>>3&1]
		cost := int64(c & 0x3f)
		switch c >> 6 {
		case 0, 1:
			r.check(p, key, cost&0x1f)
		case 2:
			r.charge(p, key, cost)
		default:
			r.checkAll([]sluice.Request{{Policy: p, Key: key, Cost: cost, Force: true}, req(p, "a", cost&7)})
		}
	}
}
