// SPDX-License-Identifier: Apache-2.0

package model

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// FuzzBurst: deciding under another burst (TakeBurst, TakeBucketBurst,
// ChargeBurst, GiveBurst) is exactly what the model of the same policy
// with that Burst does, on one state that requests of several bursts
// share, as a store shares a named policy's key state.
func FuzzBurst(f *testing.F) {
	f.Add(uint8(2), int64(3000), int64(time.Second), int64(5000), int64(0), []byte("\x00\xff\x10\x80\x03\x01\x00\x07\x40\xff"))
	f.Add(uint8(1), int64(7), int64(time.Second), int64(0), int64(1e9), []byte("\x05\x01\x02\x83\x07\x02\x00\x81"))
	f.Add(uint8(0), int64(sluice.MaxLimit), int64(1), int64(sluice.MaxLimit), int64(3), []byte("\x00\xff\x01\xfe\x02\x80"))
	f.Add(uint8(3), int64(4), int64(3*time.Second), int64(0), int64(0), []byte("\x01\x02\x03\x04"))
	f.Fuzz(checkBurst)
}

// checkBurst is FuzzBurst's body: ops are (step, cost, burst, op) quads.
func checkBurst(t *testing.T, alg uint8, limit, period, burst, t0 int64, ops []byte) {
	p := sluice.Policy{Algorithm: sluice.Algorithms()[int(alg)%len(sluice.Algorithms())], Limit: limit, Period: time.Duration(period), Burst: burst}
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
		// A burst from 1 to twice the policy's capacity (0 now and then:
		// Limit), kept where Validate accepts it.
		q := p
		if p.Algorithm.IsBucket() {
			q.Burst = max(1, p.Capacity()*int64(ops[i+2])/128)
			if ops[i+2] == 0 {
				q.Burst = 0
			}
		}
		mq, err := New(q)
		if err != nil {
			continue
		}
		cost := int64(ops[i+1] & 0x7f)
		if ops[i+1]&0x80 != 0 {
			cost = (cost + 1) * max(1, q.Capacity()/64)
		}
		before := s
		if p.Algorithm == sluice.SlidingLog {
			before.Log = append([]LogEntry(nil), s.Log...)
		}
		var got, want State
		var dg, dw sluice.Decision
		switch ops[i+3] % 4 {
		case 0, 1:
			got, dg = m.TakeBurst(s, now, cost, q.Burst)
			want, dw = mq.Take(before, now, cost)
		case 2:
			got, dg = m.ChargeBurst(s, now, cost, q.Burst)
			want, dw = mq.Charge(before, now, cost)
		case 3:
			// Give back what the last request took, if it was this one's.
			var ok, okw bool
			got, ok = m.GiveBurst(s, before, cost, q.Burst)
			want, okw = mq.Give(before, before, cost)
			if ok != okw {
				t.Fatalf("%v: GiveBurst(%d, burst %d) = %v, the model of burst %d: %v", p, cost, q.Burst, ok, q.Burst, okw)
			}
		}
		if dg != dw || !sameState(got, want) {
			t.Fatalf("%v at %d, cost %d, burst %d, op %d: %+v %+v, the model of that burst: %+v %+v", p, now, cost, q.Burst, ops[i+3]%4, got, dg, want, dw)
		}
		if p.Algorithm.IsBucket() && ops[i+3]%4 < 2 {
			tat, frac := before.Time, before.Frac
			var d sluice.Decision
			exp := m.TakeBucketBurst(&tat, &frac, now, cost, q.Burst, &d)
			if d != dw || tat != want.Time || frac != want.Frac || exp != mq.ExpiresAt(want) || exp != m.ExpiresAt(want) {
				t.Fatalf("%v at %d, cost %d, burst %d: TakeBucketBurst %+v (%d, %d) expires %d, want %+v %+v expires %d", p, now, cost, q.Burst, d, tat, frac, exp, dw, want, mq.ExpiresAt(want))
			}
		}
		s = got
	}
}

// TestBurstAgainstModel runs FuzzBurst's body over a deterministic spread
// of inputs, so that `go test` exercises it beyond the seed corpus.
func TestBurstAgainstModel(t *testing.T) {
	params := []struct{ limit, period, burst int64 }{
		{5, int64(time.Second), 10}, {3, int64(time.Second), 0}, {7, int64(time.Minute), 2},
		{1000, int64(time.Hour), 1}, {100, int64(time.Minute), 0}, {1, 1, 1}, {9, 10, 4},
		{1<<33 + 1, int64(time.Second), 1 << 34},
	}
	var buf [200]byte
	seed := uint64(3)
	for alg := range sluice.Algorithms() {
		for _, pr := range params {
			for range 20 {
				for i := range buf {
					seed = seed*6364136223846793005 + 1442695040888963407
					buf[i] = byte(seed >> 56)
				}
				burst := pr.burst
				if !sluice.Algorithms()[alg].IsBucket() {
					burst = 0
				}
				t0 := int64(binary.LittleEndian.Uint32(buf[:4])) * 1e6
				checkBurst(t, uint8(alg), pr.limit, pr.period, burst, t0, buf[4:])
			}
		}
	}
}
