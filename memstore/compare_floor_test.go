// SPDX-License-Identifier: Apache-2.0

package memstore_test

import (
	"hash/maphash"
	"sync"
	"time"
)

// floor is the sketch every memstore row is held against: the least work an
// exact per-key GCRA limiter can do in Go. 256 shards, each a mutex and a
// map from key to the theoretical arrival time as one int64 (nanoseconds
// since the sketch started), one maphash to pick the shard, one monotonic
// clock read. It has no expiry, no fractions of a nanosecond (the benchmark
// policy's emission interval is whole), no reconfiguration and no Decision
// beyond admitted or not: it is a floor, not a limiter anyone should use.
type floor struct {
	seed     maphash.Seed
	start    time.Time
	t, burst int64 // emission interval, and burst × T, in nanoseconds
	shards   [256]floorShard
}

type floorShard struct {
	mu sync.Mutex
	m  map[string]int64
	_  [48]byte // one shard's lock and map per cache line
}

const (
	floorT     = int64(benchPeriod / benchLimit) // emission interval
	floorBurst = benchLimit * floorT             // burst × T
)

func newFloor() *floor { return newFloorRate(floorT, floorBurst) }

// newFloorRate returns a floor admitting one unit per t nanoseconds with a
// bucket of burst nanoseconds (capacity × t).
func newFloorRate(t, burst int64) *floor {
	f := &floor{seed: maphash.MakeSeed(), start: time.Now(), t: t, burst: burst}
	for i := range f.shards {
		f.shards[i].m = make(map[string]int64)
	}
	return f
}

func (f *floor) shard(key string) *floorShard {
	return &f.shards[maphash.String(f.seed, key)>>56]
}

// fill empties key's bucket (one request for the whole burst).
func (f *floor) fill(key string) { f.fillN(key, f.burst) }

// fillN takes d nanoseconds' worth of units from key's full bucket.
func (f *floor) fillN(key string, d int64) {
	sh := f.shard(key)
	now := int64(time.Since(f.start))
	sh.mu.Lock()
	sh.m[key] = now + d
	sh.mu.Unlock()
}

func (f *floor) take(key string) (bool, error) {
	sh := f.shard(key)
	now := int64(time.Since(f.start))
	sh.mu.Lock()
	tat := max(sh.m[key], now)
	ok := tat+f.t-now <= f.burst
	if ok {
		sh.m[key] = tat + f.t
	}
	sh.mu.Unlock()
	return ok, nil
}
