// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"testing"
	"time"
)

// BenchmarkModelTake measures one decision of each model on a key that is
// mostly over its limit (the hot case under load), without any store.
func BenchmarkModelTake(b *testing.B) {
	for _, alg := range Algorithms {
		b.Run("alg="+string(alg), func(b *testing.B) {
			m, err := NewModel(Policy{Algorithm: alg, Limit: 100, Period: time.Second})
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
	c := MonotonicClock()
	var sink int64
	for b.Loop() {
		sink += c.Now().UnixNano()
	}
	_ = sink
}
