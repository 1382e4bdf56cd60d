// SPDX-License-Identifier: Apache-2.0

package model

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// windowKinds are the algorithms TakeLimit and its siblings serve.
var windowKinds = [...]sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow, sluice.SlidingLog}

// FuzzLimit: deciding a window kind's request under another limit
// (TakeLimit, ChargeLimit and the in-place TakeFixedWindowLimit,
// TakeSlidingWindowLimit, TakeSlidingLogLimit, JudgeSlidingLogLimit) is
// exactly what the model of the same policy with that Limit does, on one
// state that requests of several limits share, as a store shares a named
// policy's key state; and the expiry is the same under every limit.
func FuzzLimit(f *testing.F) {
	f.Add(uint8(0), int64(7), int64(time.Second), int64(0), []byte("\x00\xff\x10\x80\x03\x01\x00\x07\x40\xff"))
	f.Add(uint8(1), int64(3000), int64(time.Second), int64(1e9), []byte("\x05\x01\x02\x83\x07\x02\x00\x81"))
	f.Add(uint8(2), int64(sluice.MaxLimit), int64(1), int64(3), []byte("\x00\xff\x01\xfe\x02\x80"))
	f.Fuzz(checkLimit)
}

// checkLimit is FuzzLimit's body: ops are (step, cost, limit, op) quads.
func checkLimit(t *testing.T, alg uint8, limit, period, t0 int64, ops []byte) {
	p := sluice.Policy{Algorithm: windowKinds[int(alg)%len(windowKinds)], Limit: limit, Period: time.Duration(period)}
	m, err := New(p)
	if err != nil {
		return
	}
	if len(ops) > 256 {
		ops = ops[:256]
	}
	now := min(max(t0, 0), MaxTime)
	var s State
	for i := 0; i+3 < len(ops); i += 4 {
		now = min(now+int64(ops[i])*period/32, MaxTime)
		// A limit from 1 to twice the policy's, kept where Validate
		// accepts it.
		q := p
		l := p.Limit / 128 * int64(ops[i+2])
		if p.Limit < 1<<50 {
			l = p.Limit * int64(ops[i+2]) / 128
		}
		q.Limit = max(1, min(l, sluice.MaxLimit))
		mq, err := New(q)
		if err != nil {
			continue
		}
		cost := int64(ops[i+1] & 0x7f)
		if ops[i+1]&0x80 != 0 {
			cost = (cost + 1) * max(1, q.Limit/64)
		}
		before := s
		before.Log = slices.Clone(s.Log)
		var got, want State
		var dg, dw sluice.Decision
		if ops[i+3]%4 == 2 {
			got, dg = m.ChargeLimit(s, now, cost, q.Limit)
			want, dw = mq.Charge(before, now, cost)
		} else {
			got, dg = m.TakeLimit(s, now, cost, q.Limit)
			want, dw = mq.Take(before, now, cost)
		}
		if dg != dw || !sameState(got, want) {
			t.Fatalf("%v at %d, cost %d, limit %d, op %d: %+v %+v, the model of that limit: %+v %+v", p, now, cost, q.Limit, ops[i+3]%4, got, dg, want, dw)
		}
		if m.ExpiresAt(want) != mq.ExpiresAt(want) {
			t.Fatalf("%v: the expiry of %+v is %d under limit %d, %d under the policy's", p, want, mq.ExpiresAt(want), q.Limit, m.ExpiresAt(want))
		}
		if ops[i+3]%4 < 2 {
			// The in-place forms, on a copy of the state before.
			var d sluice.Decision
			var exp int64
			st := before
			st.Log = slices.Clone(before.Log)
			switch p.Algorithm {
			case sluice.FixedWindow:
				exp = m.TakeFixedWindowLimit(&st.Time, &st.Count, now, cost, q.Limit, &d)
			case sluice.SlidingWindow:
				exp = m.TakeSlidingWindowLimit(&st.Time, &st.Count, &st.Prev, now, cost, q.Limit, &d)
			default:
				var jd sluice.Decision
				jexp := m.JudgeSlidingLogLimit(st.Count, st.Log, now, cost, q.Limit, &jd)
				st.Log, exp = m.TakeSlidingLogLimit(st.Count, st.Log, now, cost, q.Limit, &d)
				if jd != d || jexp != exp {
					t.Fatalf("%v at %d, cost %d, limit %d: JudgeSlidingLogLimit %+v expires %d, TakeSlidingLogLimit %+v expires %d", p, now, cost, q.Limit, jd, jexp, d, exp)
				}
			}
			// TakeSlidingLogLimit keeps the entries that left the window
			// (as TakeSlidingLog does): compare what the state decides.
			if d != dw || exp != mq.ExpiresAt(want) {
				t.Fatalf("%v at %d, cost %d, limit %d: in place %+v expires %d, want %+v expires %d", p, now, cost, q.Limit, d, exp, dw, mq.ExpiresAt(want))
			}
			if p.Algorithm != sluice.SlidingLog && (st.Time != want.Time || st.Count != want.Count || st.Prev != want.Prev) {
				t.Fatalf("%v at %d, cost %d, limit %d: in place left %+v, want %+v", p, now, cost, q.Limit, st, want)
			}
		}
		s = got
	}
}

// TestLimitAgainstModel runs FuzzLimit's body over a deterministic spread
// of inputs, so that `go test` exercises it beyond the seed corpus.
func TestLimitAgainstModel(t *testing.T) {
	params := []struct{ limit, period int64 }{
		{7, int64(time.Second)}, {3, int64(time.Second)}, {100, int64(time.Minute)},
		{1000, int64(time.Hour)}, {1, 1}, {9, 10}, {1<<33 + 1, int64(time.Second)},
	}
	var buf [200]byte
	seed := uint64(11)
	for alg := range windowKinds {
		for _, pr := range params {
			for range 20 {
				for i := range buf {
					seed = seed*6364136223846793005 + 1442695040888963407
					buf[i] = byte(seed >> 56)
				}
				t0 := int64(binary.LittleEndian.Uint32(buf[:4])) * 1e6
				checkLimit(t, uint8(alg), pr.limit, pr.period, t0, buf[4:])
			}
		}
	}
}
