// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"sort"

	"github.com/sluicehq/sluice"
)

// Sliding-log rows: a key's log in its row while it is short, spilled into
// an array of its own when it is not.

type (
	// logRow holds a log of at most len(one) entries in the row itself,
	// with a base total of 0 (only differences of totals matter), so that
	// a key with few admissions in its window costs no allocation and its
	// decision one memory access: the row is one cache line. A longer log
	// spills into a logSpill, which the row keeps until the key goes.
	logRow struct {
		kb    [inlineKey]byte
		ref   uint32
		n     uint32 // entries in one; 0 once spilled
		one   [2]sluice.LogEntry
		spill *logSpill
	}
	logSpill struct {
		count int64 // the base total
		log   []sluice.LogEntry
	}
)

// state returns the row's base total and log. An inline log is a slice of
// the row itself with no spare capacity, so that appending to it never
// writes into the row; it must not be kept past the next change of the
// table's rows, which may move or clear the row.
func (r *logRow) state() (int64, []sluice.LogEntry) {
	if sp := r.spill; sp != nil {
		return sp.count, sp.log
	}
	return 0, r.one[:r.n:r.n]
}

// setState stores the base total count and log as the row's: inline while
// the log fits and the row has not spilled, else in the spill.
func (r *logRow) setState(count int64, log []sluice.LogEntry) {
	if sp := r.spill; sp != nil {
		sp.count, sp.log = count, log
		return
	}
	if len(log) <= len(r.one) {
		for i, e := range log {
			r.one[i] = sluice.LogEntry{At: e.At, Total: e.Total - uint64(count)}
		}
		r.n = uint32(len(log))
		return
	}
	r.spill, r.n = &logSpill{count: count, log: log}, 0
}

// pruneInline drops the inline entries at or before cutoff, which have left
// the window.
func (r *logRow) pruneInline(cutoff int64) {
	k := 0
	for k < int(r.n) && r.one[k].At <= cutoff {
		k++
	}
	if k == 0 {
		return
	}
	base := r.one[k-1].Total
	n := copy(r.one[:], r.one[k:r.n])
	for i := range n {
		r.one[i].Total -= base
	}
	r.n = uint32(n)
}

// takeLog applies one request to a sliding-log row and returns the key's
// expiry.
func takeLog(c *compiled, r *logRow, now, cost int64, d *sluice.Decision) int64 {
	// Nothing is written unless the log changes: a rejection leaves the
	// row's cache line clean, for another core to read without a transfer.
	if sp := r.spill; sp != nil {
		if cost > 0 && len(sp.log) == cap(sp.log) {
			sp.log, sp.count = logRoom(sp.log, sp.count, now-c.period, 1)
		}
		// The model appends in place, and the log stays at the start of
		// its array, pruned entries included, so that the array is reused
		// rather than reallocated.
		log, exp := c.model.TakeSlidingLog(sp.count, sp.log, now, cost, d)
		if len(log) != len(sp.log) {
			sp.log = log
		}
		return exp
	}
	if cost > 0 && int(r.n) == len(r.one) {
		r.pruneInline(now - c.period)
	}
	log, exp := c.model.TakeSlidingLog(0, r.one[:r.n:len(r.one)], now, cost, d)
	switch {
	case len(log) == int(r.n):
	case len(log) <= len(r.one):
		r.n = uint32(len(log)) // appended in place
	default:
		// The append moved a full inline log into a new array.
		r.spill, r.n = &logSpill{log: log}, 0
	}
	return exp
}

// logRoom makes room for need more entries in a sliding-log log without
// changing its meaning: when the backing array is too full it drops the
// entries at or before cutoff (now − Period) into the base total, and grows
// or shrinks the array so that pruning and reallocating stay amortized O(1).
// The log stays at the start of its array, so the array is reused forever
// rather than reallocated as the window slides.
func logRoom(log []sluice.LogEntry, count, cutoff int64, need int) ([]sluice.LogEntry, int64) {
	if cap(log)-len(log) >= need {
		return log, count
	}
	// The first entry still inside the window (amortized: this runs when
	// the array is full).
	lo := sort.Search(len(log), func(i int) bool { return log[i].At > cutoff })
	if lo > 0 {
		count = int64(log[lo-1].Total)
		log = log[:copy(log, log[lo:])]
	}
	if n := len(log); 4*(n+need) > 3*cap(log) || cap(log) > 32 && 8*(n+need) < cap(log) {
		log = append(make([]sluice.LogEntry, 0, max(4, 2*(n+need))), log...)
	}
	return log, count
}
