// SPDX-License-Identifier: Apache-2.0

// Package clock is the time source a store reads: the interface a test's
// fake clock implements, and a clock that never steps back.
package clock

import "time"

// Clock supplies the current time to a store (memstore.WithClock,
// redisstore.WithClock, lease.WithClock). Stores convert it to nanoseconds
// since the Unix epoch.
type Clock interface {
	Now() time.Time
}

// Nano is a Clock that can also read the time directly as nanoseconds
// since the Unix epoch, which is cheaper than Now().UnixNano(). Stores use
// UnixNano when their clock has it.
type Nano interface {
	Clock
	UnixNano() int64
}

// Monotonic returns a clock that reads the wall clock once and then
// advances with the monotonic clock, so it never steps back when the
// system time is adjusted. It is a Nano.
func Monotonic() Nano {
	now := time.Now()
	return monotonic{start: now, base: now.UnixNano()}
}

type monotonic struct {
	start time.Time
	base  int64 // start.UnixNano()
}

func (c monotonic) Now() time.Time {
	return c.start.Add(time.Since(c.start))
}

func (c monotonic) UnixNano() int64 {
	return c.base + int64(time.Since(c.start))
}
