// SPDX-License-Identifier: Apache-2.0

package memstore_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// Admissions. BenchmarkCompareTake times refusals: its keys are full. A
// limiter in normal operation mostly admits, and an admission writes the
// key's state, which a refusal need not. BenchmarkCompareAdmit times that:
// 100k keys limited to 1000/s each (admitPolicy), each key drained to half
// its capacity before timing so that it is held (not expired) and has room
// for every request of the run: every decision is admitted and written, as
// admits/op shows. Names and competitors are as in BenchmarkCompareTake.

const (
	admitKeys = 100_000
	// admitLimit per admitPeriod is 1000/s; the long period gives each key
	// a capacity (admitLimit) that no run of the benchmark exhausts.
	admitLimit  = 1_000_000
	admitPeriod = 1000 * time.Second
	admitFill   = admitLimit / 2 // units each key takes before timing
)

func admitPolicy(alg sluice.Algorithm) sluice.Policy {
	return sluice.Policy{Name: "admit", Algorithm: alg, Limit: admitLimit, Period: admitPeriod}
}

// BenchmarkCompareAdmit measures one admitted decision on an existing key.
// Sub-benchmarks are named store=S[/alg=A]/keys=100k/procs=P.
func BenchmarkCompareAdmit(b *testing.B) {
	ctx := context.Background()
	keys := benchKeys(admitKeys)
	run := func(b *testing.B, setup func(b *testing.B) (taker, func())) {
		b.Run("keys=100k", func(b *testing.B) {
			t, done := setup(b)
			defer done()
			forProcs(b, t, benchWalk(admitKeys))
		})
	}
	for _, alg := range []sluice.Algorithm{sluice.GCRA, sluice.TokenBucket, sluice.SlidingLog} {
		p := admitPolicy(alg)
		b.Run("store=mem/alg="+string(alg), func(b *testing.B) {
			run(b, func(b *testing.B) (taker, func()) {
				s := memstore.New()
				for _, k := range keys {
					if d, err := s.Take(ctx, p, k, admitFill); err != nil || !d.Allowed {
						b.Fatalf("prefill %q: %+v, %v", k, d, err)
					}
				}
				l, err := sluice.NewLimiter(s, p)
				if err != nil {
					b.Fatal(err)
				}
				return memTaker{l}, func() { s.Close() }
			})
		})
	}
	b.Run("store=xrate-map", func(b *testing.B) {
		run(b, func(b *testing.B) (taker, func()) {
			t := &xrateMap{m: make(map[string]*rate.Limiter, admitKeys)}
			for _, k := range keys {
				l := rate.NewLimiter(rate.Every(admitPeriod/admitLimit), admitLimit)
				l.AllowN(time.Now(), admitFill)
				t.m[k] = l
			}
			return t, func() {}
		})
	})
	b.Run("store=sethvargo", func(b *testing.B) {
		run(b, func(b *testing.B) (taker, func()) {
			t := newSethvargoRate(b, admitLimit, admitPeriod)
			for _, k := range keys {
				if _, err := t.take(k); err != nil { // go-limiter takes one token at a time
					b.Fatal(err)
				}
			}
			return t, t.close
		})
	})
	b.Run("store=floor", func(b *testing.B) {
		run(b, func(b *testing.B) (taker, func()) {
			per := int64(admitPeriod / admitLimit)
			t := newFloorRate(per, admitLimit*per)
			for _, k := range keys {
				t.fillN(k, admitFill*per)
			}
			return t, func() {}
		})
	})
}
