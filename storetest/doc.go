// SPDX-License-Identifier: Apache-2.0

// Package storetest is the conformance suite that every sluice.Store passes.
//
// The pure models (model.New and Model.Take) are the oracle: for any
// sequence of requests, a store must give exactly the decisions the models
// give when they are run on states of their own, field for field, and it must
// forget a key exactly when the model says the key's state has become
// equivalent to no state (Model.ExpiresAt): not a nanosecond before, and (as
// far as Harness.Len can tell) not after.
//
// # Using it
//
// A store's own tests call Run with a function that builds one fresh,
// empty store whose clock is a sluicetest.Clock the suite can move:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Harness {
//			clock := sluicetest.NewClock(time.Unix(0, 0))
//			s := memstore.New(memstore.WithClock(clock))
//			t.Cleanup(func() { s.Close() })
//			return storetest.Harness{
//				Store: s,
//				Clock: clock,
//				Len:   func() int { s.Sweep(); return s.Len() },
//			}
//		})
//	}
//
// Run calls the function once or more per subtest. Harnesses must not share
// state: the Model subtests run in parallel. A store backed by a server
// (Redis, say) gives each harness its own database or key prefix, runs in a
// mode where the time comes from the Clock rather than from the server, and
// releases what it holds with t.Cleanup.
//
// # What it checks
//
// The subtests, by name:
//
//   - Model/<algorithm>/<parameters>: random, tie-heavy traces over several
//     keys (many requests at one instant, steps of a few nanoseconds, steps
//     that land exactly on window boundaries, on the instant a rejected
//     request becomes admissible and on the instant a state expires; costs 0,
//     1, random, equal to and above the capacity), compared decision by
//     decision with the model. Parameters include fractional emission
//     intervals, bursts that differ from the limit, tiny and huge periods and
//     very large limits. The traces are deterministic.
//   - Seeds/...: the worked examples of the design, with exact numbers.
//   - Concurrency/<algorithm>: 256 goroutines released together race for one
//     key; exactly the capacity is admitted, and every admitted decision
//     reports a distinct Remaining.
//   - Expiry/<algorithm>: a key is still held, and still limits, one
//     nanosecond before Model.ExpiresAt, and is gone at that instant; also
//     for a flood of keys over every algorithm.
//   - TakeAll/...: all-or-nothing batches (see below), also concurrently over
//     overlapping keys in opposite orders.
//   - Peek, Impossible, Errors, Policies: cost 0, costs that can never be
//     admitted, invalid input and cancelled contexts, and which policies
//     share per-key state (those with the same non-empty Name and Algorithm,
//     and identical unnamed ones; no others).
//   - Charge/<algorithm>/...: charges (sluice.Request.Force, Model.Charge)
//     recorded past the limit: Envoy's check-then-debit (exactly 4 checks
//     of a 1000 budget with debits of 300), random takes and charges,
//     charges in batches, the caps of huge charges, the expiry of a key in
//     debt, and charges raced from many goroutines adding up exactly.
//     Charges is the same as a fuzz body over any sequence of takes,
//     charges and batches of both.
//   - Bursts/<algorithm>/...: requests of one named bucket policy whose
//     Burst changes from request to request (sluice.Check.Burst), and
//     Limits/<algorithm>/...: requests of one named window policy whose
//     Limit does (sluice serve's limit overrides): takes, peeks, charges
//     and batches on one state per key, each decided as the model of the
//     request's own policy decides it. Bursts and Limits are the same as
//     fuzz bodies.
//
// # TakeAll
//
// The suite holds Store.TakeAll to this reading of its contract. The
// requests are evaluated in order, each on the state left by those before it
// in the batch (a rejected one leaves no effect, as with Take). If all are
// admitted, all are recorded and out[i] is request i's decision. Otherwise
// nothing is recorded; each rejected request reports its decision from that
// evaluation (Allowed false), and each request that was admitted reports
// what a cost-0 peek at its key's stored state would (Allowed true). A
// forced request (a charge) never refuses the batch: it is evaluated with
// Model.Charge, recorded with the batch, and when another request refuses
// the batch it too reports a peek at its key's stored state.
//
// # Time
//
// The suite moves the harness Clock and never sleeps; Len is optional (when
// it is nil the expiry checks look at decisions only). Start clocks at
// time.Unix(0, 0) or any fixed instant: the suite sets the clock before every
// check.
package storetest
