// SPDX-License-Identifier: Apache-2.0

package model

import (
	"github.com/sluicehq/sluice"

	"encoding/binary"
	"math/big"
	"testing"
	"time"
)

// ref is an independent, exact big-number reference for every algorithm,
// written straight from the semantics table in DESIGN.md §2. The fuzz test
// checks the int64 models against it.
type ref struct {
	alg            sluice.Algorithm
	n, b, p        *big.Rat // limit, burst, period (ns)
	tat            *big.Rat // bucket kinds
	win, cur, prev int64    // window kinds: window index and counts
	log            [][2]int64
}

func newRef(p sluice.Policy) *ref {
	return &ref{alg: p.Algorithm, n: big.NewRat(p.Limit, 1), b: big.NewRat(p.Capacity(), 1),
		p: big.NewRat(int64(p.Period), 1), tat: new(big.Rat), win: -1 << 62}
}

func (r *ref) clone() *ref {
	c := *r
	c.tat = new(big.Rat).Set(r.tat)
	c.log = append([][2]int64(nil), r.log...)
	return &c
}

// admit applies a request of cost c at t (c > 0) and reports admission.
func (r *ref) admit(t, c int64) bool {
	rt, rc := big.NewRat(t, 1), big.NewRat(c, 1)
	switch r.alg {
	case sluice.FixedWindow, sluice.SlidingWindow:
		pn := r.p.Num().Int64()
		w := floorDiv(t, pn)
		if w < r.win { // a clock that stepped back stays in the newest window
			w, t = r.win, r.win*pn
		}
		switch {
		case w == r.win+1:
			r.prev, r.cur = r.cur, 0
		case w > r.win+1:
			r.prev, r.cur = 0, 0
		}
		r.win = w
		used := new(big.Rat).Add(big.NewRat(r.cur, 1), rc) // in int64, cur+c can overflow
		if r.alg == sluice.SlidingWindow {
			e := t - w*pn
			weight := new(big.Rat).Mul(big.NewRat(r.prev, 1), big.NewRat(pn-e, pn))
			used.Add(used, weight)
		}
		if used.Cmp(r.n) > 0 {
			return false
		}
		r.cur += c
		return true
	case sluice.SlidingLog:
		var sum int64
		for _, e := range r.log {
			if e[0] > t-r.p.Num().Int64() {
				sum += e[1]
			}
		}
		if new(big.Rat).Add(big.NewRat(sum, 1), rc).Cmp(r.n) > 0 {
			return false
		}
		at := t
		if k := len(r.log); k > 0 && r.log[k-1][0] > at {
			at = r.log[k-1][0]
		}
		r.log = append(r.log, [2]int64{at, c})
		return true
	default:
		interval := new(big.Rat).Quo(r.p, r.n)
		start := r.tat
		if start.Cmp(rt) < 0 {
			start = rt
		}
		next := new(big.Rat).Add(start, new(big.Rat).Mul(rc, interval))
		if new(big.Rat).Sub(next, rt).Cmp(new(big.Rat).Mul(r.b, interval)) > 0 {
			return false
		}
		r.tat = next
		return true
	}
}

// FuzzModels drives every model with arbitrary parameters, times and costs:
// no panic, and every decision equal to the exact reference's; RetryAfter
// is exact (admitted at now+RetryAfter, not a nanosecond before).
func FuzzModels(f *testing.F) {
	f.Add(uint8(0), int64(5), int64(time.Second), int64(10), int64(0), []byte("\x00\x01\x00\x01\x00\x01\x00\x01\x00\x01\x00\x01\x10\x01"))
	f.Add(uint8(3), int64(100), int64(time.Minute), int64(0), int64(59e9), []byte("\x00\x64\xff\x01\x00\x01"))
	f.Add(uint8(5), int64(50), int64(time.Minute), int64(0), int64(1<<61), []byte("\x30\x2a\x20\x12\x01\x01\x01\x01"))
	f.Add(uint8(4), int64(7), int64(3), int64(0), int64(MaxTime-5), []byte("\x00\x03\x01\x04\x02\x07\x00\x01"))
	f.Add(uint8(2), int64(3000), int64(time.Second), int64(5000), int64(0), []byte("\x00\xff\x00\xff\x80\xff\x00\x10"))
	f.Add(uint8(1), int64(sluice.MaxLimit), int64(1), int64(sluice.MaxLimit), int64(7), []byte("\x01\x02\x03\x04"))
	// Two takes of the whole MaxLimit at one instant: the second must be
	// refused, on every algorithm (a sum of the count and the cost would
	// overflow int64).
	for alg := range sluice.Algorithms() {
		f.Add(uint8(alg), int64(sluice.MaxLimit), int64(time.Second), int64(0), int64(0), []byte("\x00\xff\x00\xff\x00\x01"))
	}
	f.Fuzz(checkModel)
}

// checkModel is FuzzModels' body.
func checkModel(t *testing.T, alg uint8, limit, period, burst, t0 int64, ops []byte) {
	{
		p := sluice.Policy{Algorithm: sluice.Algorithms()[int(alg)%len(sluice.Algorithms())], Limit: limit, Period: time.Duration(period), Burst: burst}
		m, err := New(p)
		if err != nil {
			return // Validate refused it (without panicking)
		}
		if len(ops) > 256 {
			ops = ops[:256]
		}
		now := min(max(t0, 0), MaxTime)
		r := newRef(p)
		var s State
		for i := 0; i+1 < len(ops); i += 2 {
			// Steps: 0, a few ns, a fraction of the period, or a whole
			// period or two (ties and boundaries are where bugs live).
			switch step := ops[i]; {
			case step < 0x40:
			case step < 0x80:
				now += int64(step & 7)
			case step < 0xc0:
				now += int64(step&0x3f) * period / 64
			default:
				now += int64(step&1+1) * period
			}
			if now > MaxTime {
				return
			}
			cost := int64(ops[i+1] & 0x7f)
			if ops[i+1]&0x80 != 0 {
				cost = (cost + 1) * max(1, p.Capacity()/128)
			}
			var d sluice.Decision
			before := s
			if p.Algorithm == sluice.SlidingLog {
				before.Log = append([]LogEntry(nil), s.Log...)
			}
			s, d = m.Take(s, now, cost)
			if cost > p.Capacity() {
				if d.Allowed || !d.Impossible || d.RetryAfter != 0 {
					t.Fatalf("%v: cost %d > capacity at %d: %+v", p, cost, now, d)
				}
				continue
			}
			if d.Remaining < 0 || d.ResetAfter < 0 || d.RetryAfter < 0 || d.Delay < 0 {
				t.Fatalf("%v: negative field at %d cost %d: %+v", p, now, cost, d)
			}
			// A peek (cost 0) changes nothing and is admitted iff cost 1
			// would be: its RetryAfter is that of cost 1.
			judged := max(cost, 1)
			if want := r.clone().admit(now, judged); d.Allowed != want {
				t.Fatalf("%v: at %d cost %d: model allowed=%v, reference %v (%+v)", p, now, cost, d.Allowed, want, d)
			}
			if cost == 0 {
				if !sameState(s, before) {
					t.Fatalf("%v: a peek at %d changed the state: %+v, was %+v", p, now, s, before)
				}
				if d.Allowed {
					continue
				}
			} else if d.Allowed {
				r.admit(now, cost)
				continue
			}
			cost = judged
			// Rejected: exactly RetryAfter from now it fits, not 1ns earlier.
			at := now + int64(d.RetryAfter)
			if at > MaxTime {
				continue // beyond the models' time domain
			}
			if d.RetryAfter <= 0 {
				t.Fatalf("%v: rejected at %d cost %d with RetryAfter %v", p, now, cost, d.RetryAfter)
			}
			if !r.clone().admit(at, cost) {
				t.Fatalf("%v: at %d cost %d: RetryAfter %v is too early", p, now, cost, d.RetryAfter)
			}
			if at-1 > now && r.clone().admit(at-1, cost) {
				t.Fatalf("%v: at %d cost %d: RetryAfter %v is not tight", p, now, cost, d.RetryAfter)
			}
			if _, d2 := m.Take(before, at, cost); !d2.Allowed {
				t.Fatalf("%v: model rejects at now+RetryAfter (%d): %+v", p, at, d2)
			}
		}
	}
}

// TestModelsAgainstReference runs the model fuzz body over a deterministic spread
// of inputs, so `go test` exercises it beyond the seed corpus.
func TestModelsAgainstReference(t *testing.T) {
	params := []struct{ limit, period, burst int64 }{
		{5, int64(time.Second), 10}, {3, int64(time.Second), 0}, {7, int64(time.Minute), 2},
		{1000, int64(time.Hour), 1}, {100, int64(time.Minute), 0}, {1, 1, 1}, {9, 10, 4},
	}
	var buf [128]byte
	seed := uint64(1)
	for alg := range sluice.Algorithms() {
		for _, pr := range params {
			for trial := 0; trial < 20; trial++ {
				for i := range buf {
					seed = seed*6364136223846793005 + 1442695040888963407
					buf[i] = byte(seed >> 56)
				}
				burst := pr.burst
				if !sluice.Algorithms()[alg].IsBucket() {
					burst = 0
				}
				t0 := int64(binary.LittleEndian.Uint32(buf[:4])) * 1e6
				checkModel(t, uint8(alg), pr.limit, pr.period, burst, t0, buf[4:])
			}
		}
	}
}

// sameState reports whether a and b are the same state, log entries included.
func sameState(a, b State) bool {
	if a.Time != b.Time || a.Frac != b.Frac || a.Count != b.Count || a.Prev != b.Prev || len(a.Log) != len(b.Log) {
		return false
	}
	for i := range a.Log {
		if a.Log[i] != b.Log[i] {
			return false
		}
	}
	return true
}
