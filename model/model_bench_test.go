// SPDX-License-Identifier: Apache-2.0

package model

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"

	"testing"
	"time"
)

// BenchmarkModelTake measures one decision of each model on a key that is
// mostly over its limit (the hot case under load), without any store.
func BenchmarkModelTake(b *testing.B) {
	for _, alg := range sluice.Algorithms() {
		b.Run("alg="+string(alg), func(b *testing.B) {
			m, err := New(sluice.Policy{Algorithm: alg, Limit: 100, Period: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			var s State
			now := int64(1e18)
			b.ReportAllocs()
			for b.Loop() {
				now += 1000 // 1 µs per request: 10,000/s against 100/s
				s, _ = m.Take(s, now, 1)
			}
		})
	}
}

// BenchmarkClock measures reading the default clock.
func BenchmarkClock(b *testing.B) {
	c := clock.Monotonic()
	var sink int64
	for b.Loop() {
		sink += c.Now().UnixNano()
	}
	_ = sink
}

// BenchmarkDivide compares a division instruction with divisor.div on a
// chain of dependent divisions (latency, as on the models' paths), by the
// benchmark policy's emission interval (600 ms in ns).
func BenchmarkDivide(b *testing.B) {
	const d = int64(600 * time.Millisecond)
	b.Run("op=instruction", func(b *testing.B) {
		n := int64(1e18)
		for b.Loop() {
			n = n/d + 1e18
		}
		sinkDiv = n
	})
	b.Run("op=divisor", func(b *testing.B) {
		v := newDivisor(d)
		n := int64(1e18)
		for b.Loop() {
			n = v.div(n) + 1e18
		}
		sinkDiv = n
	})
}

var sinkDiv int64
