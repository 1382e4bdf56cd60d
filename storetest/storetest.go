// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

// Harness is one fresh, empty store under test, with the clock it reads.
type Harness struct {
	// Store is the store under test. It must read the current time from
	// Clock on every call.
	Store sluice.Store
	// Clock is the store's clock. The suite moves it; the store only reads
	// it.
	Clock *sluicetest.Clock
	// Len returns the number of keys the store holds at the clock's current
	// instant, after dropping every key whose state has expired (for
	// memstore: Sweep, then Len). Optional: when nil, the expiry checks look
	// at decisions only.
	Len func() int
}

// Run runs the conformance suite against the stores newHarness builds. It
// calls newHarness at least once per subtest, each time for a new, empty
// store that shares nothing with any other; it may call it from parallel
// subtests.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("Model", func(t *testing.T) { testModel(t, newHarness) })
	t.Run("Seeds", func(t *testing.T) { testSeeds(t, newHarness) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, newHarness) })
	t.Run("Expiry", func(t *testing.T) { testExpiry(t, newHarness) })
	t.Run("TakeAll", func(t *testing.T) { testTakeAll(t, newHarness) })
	t.Run("Peek", func(t *testing.T) { testPeek(t, newHarness) })
	t.Run("Impossible", func(t *testing.T) { testImpossible(t, newHarness) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, newHarness) })
	t.Run("Policies", func(t *testing.T) { testPolicies(t, newHarness) })
	t.Run("Contract", func(t *testing.T) { testContract(t, newHarness) })
	t.Run("Calendar", func(t *testing.T) { testCalendar(t, newHarness) })
	t.Run("Charge", func(t *testing.T) { testCharge(t, newHarness) })
	t.Run("Bursts", func(t *testing.T) { testBursts(t, newHarness) })
	t.Run("Limits", func(t *testing.T) { testLimits(t, newHarness) })
}

// rig drives one harness and keeps the model's view of the same requests.
type rig struct {
	t   *testing.T
	h   Harness
	ctx context.Context
	o   *oracle
	now int64
}

func newRig(t *testing.T, newHarness func(t *testing.T) Harness, start int64) *rig {
	t.Helper()
	h := newHarness(t)
	if h.Store == nil || h.Clock == nil {
		t.Fatal("storetest: the harness has no Store or no Clock")
	}
	r := &rig{t: t, h: h, ctx: t.Context(), o: newOracle(t)}
	r.at(start)
	return r
}

// at sets the store's clock to ns nanoseconds since the Unix epoch.
func (r *rig) at(ns int64) {
	r.now = ns
	r.h.Clock.Set(time.Unix(0, ns))
}

// take runs one request on the store; an error is fatal.
func (r *rig) take(p sluice.Policy, key string, cost int64) sluice.Decision {
	r.t.Helper()
	d, err := r.h.Store.Take(r.ctx, p, key, cost)
	if err != nil {
		r.t.Fatalf("Take(%v, %q, %d) at %s: %v", p, key, cost, fmtTime(r.now), err)
	}
	return d
}

// check runs one request on the store and on the model and fails unless
// their decisions are equal. It returns the decision.
func (r *rig) check(p sluice.Policy, key string, cost int64) sluice.Decision {
	r.t.Helper()
	want := r.o.take(p, key, r.now, cost)
	got := r.take(p, key, cost)
	if got != want {
		r.t.Fatalf("%v key %q cost %d at %s:\n got  %s\n want %s", p, key, cost, fmtTime(r.now), fmtDecision(got), fmtDecision(want))
	}
	return got
}

// peek checks a cost-0 request: the store's decision must equal the model's.
func (r *rig) peek(p sluice.Policy, key string) sluice.Decision {
	r.t.Helper()
	return r.check(p, key, 0)
}

// length returns Len(), or -1 when the harness has none.
func (r *rig) length() int {
	if r.h.Len == nil {
		return -1
	}
	return r.h.Len()
}

// wantLen fails unless the store holds n keys (when the harness can tell).
func (r *rig) wantLen(n int, what string) {
	r.t.Helper()
	if got := r.length(); got >= 0 && got != n {
		r.t.Fatalf("%s: at %s the store holds %d keys, want %d", what, fmtTime(r.now), got, n)
	}
}

// oracle runs the models on states of its own, with the store's rules for
// which policies share a key's state.
type oracle struct {
	t      *testing.T
	models map[sluice.Policy]*model.Model
	states map[stateKey]model.State
}

type stateKey struct {
	policy sluice.Policy // identity(p)
	key    string
}

func newOracle(t *testing.T) *oracle {
	return &oracle{t: t, models: map[sluice.Policy]*model.Model{}, states: map[stateKey]model.State{}}
}

// identity returns what decides which state p uses: policies with the same
// non-empty Name and Algorithm share state; unnamed ones only with identical
// policies.
func identity(p sluice.Policy) sluice.Policy {
	if p.Name != "" {
		return sluice.Policy{Name: p.Name, Algorithm: p.Algorithm}
	}
	return p
}

func (o *oracle) model(p sluice.Policy) *model.Model {
	o.t.Helper()
	m, ok := o.models[p]
	if !ok {
		var err error
		if m, err = model.New(p); err != nil {
			o.t.Fatalf("storetest: bad test policy: %v", err)
		}
		o.models[p] = m
	}
	return m
}

// state returns a copy of the state of (p, key) that the caller may change.
func (o *oracle) state(p sluice.Policy, key string) model.State {
	s := o.states[stateKey{identity(p), key}]
	s.Log = slices.Clone(s.Log)
	return s
}

func (o *oracle) take(p sluice.Policy, key string, now, cost int64) sluice.Decision {
	o.t.Helper()
	k := stateKey{identity(p), key}
	s, d := o.model(p).Take(o.states[k], now, cost)
	o.states[k] = s
	return d
}

// expiresAt returns when the state of (p, key) expires.
func (o *oracle) expiresAt(p sluice.Policy, key string) int64 {
	return o.model(p).ExpiresAt(o.states[stateKey{identity(p), key}])
}

// takeAll returns the decisions of a TakeAll batch at now and records its
// effect if the batch is admitted; see the package documentation.
func (o *oracle) takeAll(reqs []sluice.Request, now int64) ([]sluice.Decision, bool) {
	o.t.Helper()
	tentative := map[stateKey]model.State{}
	out := make([]sluice.Decision, len(reqs))
	admitted := true
	for i, q := range reqs {
		k := stateKey{identity(q.Policy), q.Key}
		s, ok := tentative[k]
		if !ok {
			s = o.state(q.Policy, q.Key)
		}
		if q.Force {
			s, out[i] = o.model(q.Policy).Charge(s, now, q.Cost)
		} else {
			s, out[i] = o.model(q.Policy).Take(s, now, q.Cost)
			admitted = admitted && out[i].Allowed
		}
		tentative[k] = s
	}
	if admitted {
		for k, s := range tentative {
			o.states[k] = s
		}
		return out, true
	}
	for i, q := range reqs {
		if out[i].Allowed || q.Force {
			_, out[i] = o.model(q.Policy).Take(o.states[stateKey{identity(q.Policy), q.Key}], now, 0)
		}
	}
	return out, false
}

// capacity returns the largest cost p can ever admit: the burst of the bucket
// kinds, the limit of the window kinds.
func capacity(p sluice.Policy) int64 {
	if p.Algorithm.IsBucket() && p.Burst != 0 {
		return p.Burst
	}
	return p.Limit
}

// policyFor returns a policy of algorithm alg with limit per period, and for
// the bucket kinds the given burst (ignored for the window kinds).
func policyFor(alg sluice.Algorithm, limit int64, period time.Duration, burst int64) sluice.Policy {
	p := sluice.Policy{Algorithm: alg, Limit: limit, Period: period}
	if alg.IsBucket() {
		p.Burst = burst
	}
	return p
}

func fmtDecision(d sluice.Decision) string {
	return fmt.Sprintf("{Allowed:%v Impossible:%v Limit:%d Remaining:%d RetryAfter:%v ResetAfter:%v Delay:%v}",
		d.Allowed, d.Impossible, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay)
}

// fmtTime formats an instant as nanoseconds since the epoch.
func fmtTime(ns int64) string { return fmt.Sprintf("t=%dns", ns) }

// Fixed instants the tests start at: a window boundary for every period, and
// an arbitrary later one that is a boundary for none of the short ones.
const (
	epoch = 0
	later = 1_700_000_000_123_456_789
)
