// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"sort"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// Sliding-log rows: a key's log in its row while it is short, spilled into
// an array of its own when it is not.

type (
	// logRow holds a log of at most len(one) entries in the row itself,
	// with a base total of 0 (only differences of totals matter), so that
	// a key with few admissions in its window costs no allocation and its
	// decision one memory access: the row is one cache line. A longer log
	// spills into a logSpill, which the row keeps until the key goes.
	//
	// Both forms hold exactly the model's state: entries that have left
	// the window are dropped at an admission, as Model.Take drops them,
	// and never at a rejection. (Keeping them would change no decision on
	// a clock that only moves forward, but would on one that steps back,
	// or after a named policy's Period grows.)
	logRow struct {
		kb    [inlineKey]byte
		ref   uint32
		n     uint32 // entries in one; 0 once spilled
		one   [2]model.LogEntry
		spill *logSpill
	}
	// logSpill is a longer log. The model's log is log[low:]; the entries
	// before low have left the window and stay only until the array needs
	// room (makeRoom), so that the array is reused as the window slides
	// rather than reallocated.
	//
	// Once shared (published as a hot key's copy, hot.go), the array's
	// entries below len(log) are never written again: makeRoom moves the
	// log into a new array rather than compacting it in place.
	logSpill struct {
		count  int64 // the base total before log[0]
		log    []model.LogEntry
		low    int
		shared bool
	}
)

// state returns the row's base total and log, as the model holds them. An
// inline log is a slice of the row itself with no spare capacity: it must
// not be kept past the next change of the table's rows, which may move or
// clear the row, nor written to. A spilled log is a slice of the spill's
// array, which stays where it is.
func (r *logRow) state() (int64, []model.LogEntry) {
	if sp := r.spill; sp != nil {
		return sp.view()
	}
	return 0, r.one[:r.n:r.n]
}

// setState stores the base total count and log as the row's: inline while
// the log fits and the row has not spilled, else in the spill.
func (r *logRow) setState(count int64, log []model.LogEntry) {
	if sp := r.spill; sp != nil {
		sp.count, sp.log, sp.low = count, log, 0
		return
	}
	if len(log) <= len(r.one) {
		for i, e := range log {
			r.one[i] = model.LogEntry{At: e.At, Total: e.Total - uint64(count)}
		}
		r.n = uint32(len(log))
		return
	}
	r.spill, r.n = &logSpill{count: count, log: log}, 0
}

// view returns the model's state of a spilled log.
func (sp *logSpill) view() (int64, []model.LogEntry) {
	if sp.low == 0 {
		return sp.count, sp.log
	}
	return int64(sp.log[sp.low-1].Total), sp.log[sp.low:]
}

// makeRoom makes room for need more entries at the end of the array
// without changing the model's state: when the array is full it drops the
// entries before low, and grows or shrinks the array so that dropping and
// reallocating stay amortized O(1).
func (sp *logSpill) makeRoom(need int) {
	if cap(sp.log)-len(sp.log) >= need {
		return
	}
	if sp.low > 0 {
		sp.count = int64(sp.log[sp.low-1].Total)
		if sp.shared {
			sp.log, sp.low, sp.shared = sp.log[sp.low:], 0, false
			sp.realloc(need)
			return
		}
		sp.log = sp.log[:copy(sp.log, sp.log[sp.low:])]
		sp.low = 0
	}
	if n := len(sp.log); 4*(n+need) > 3*cap(sp.log) || cap(sp.log) > 32 && 8*(n+need) < cap(sp.log) {
		sp.realloc(need)
	}
}

// realloc moves the log into a new array with room for need more entries
// and as many again.
func (sp *logSpill) realloc(need int) {
	n := len(sp.log)
	sp.log = append(make([]model.LogEntry, 0, max(4, 2*(n+need))), sp.log...)
	sp.shared = false
}

// admitted records that the model appended one entry at the end of the
// array to the view it was given (live), at now, under a policy of period
// p: like the model, it drops the entries that had left the window.
func (sp *logSpill) admitted(live []model.LogEntry, now, p int64) {
	sp.log = sp.log[:len(sp.log)+1]
	sp.low += sort.Search(len(live), func(i int) bool { return live[i].At > now-p })
}

// committed records that a TakeAll batch, given the view of live entries
// after makeRoom, appended appended entries in place, and that the model's
// log is now the last final of them: the entries before have left the
// window.
func (sp *logSpill) committed(live, appended, final int) {
	end := sp.low + live + appended
	sp.log = sp.log[:end]
	sp.low = end - final
}

// pruned returns the inline log one[:n] without the entries at or before
// cutoff, rebased so that the base total stays 0, and its length.
func pruned(one [2]model.LogEntry, n int, cutoff int64) ([2]model.LogEntry, int) {
	k := 0
	for k < n && one[k].At <= cutoff {
		k++
	}
	if k > 0 {
		base := one[k-1].Total
		n = copy(one[:], one[k:n])
		for i := range n {
			one[i].Total -= base
		}
	}
	return one, n
}

// takeLog applies one request to a sliding-log row and returns the key's
// expiry. A rejection writes nothing, except to make room in a full
// spilled array (which changes no state): the row's cache line stays
// clean, for another core to read without a transfer.
func takeLog(c *compiled, r *logRow, now, cost, limit int64, d *sluice.Decision) int64 {
	if sp := r.spill; sp != nil {
		if cost > 0 {
			sp.makeRoom(1)
		}
		base, live := sp.view()
		log, exp := c.model.TakeSlidingLogLimit(base, live, now, cost, limit, d)
		if len(log) > len(live) { // admitted, appended in place
			sp.admitted(live, now, c.period)
		}
		return exp
	}
	n := int(r.n)
	if cost > 0 && n > 0 && r.one[0].At <= now-c.period {
		// An entry has left the window, which the model drops at an
		// admission: decide on a pruned copy, and write it back only if
		// the request is admitted. Pruning leaves room for the new entry.
		one, m := pruned(r.one, n, now-c.period)
		log, exp := c.model.TakeSlidingLogLimit(0, one[:m:len(one)], now, cost, limit, d)
		if len(log) > m {
			r.one, r.n = one, uint32(len(log))
		}
		return exp
	}
	log, exp := c.model.TakeSlidingLogLimit(0, r.one[:n:len(r.one)], now, cost, limit, d)
	switch {
	case len(log) == n:
		// Nothing admitted: nothing written.
	case len(log) <= len(r.one):
		r.n = uint32(len(log)) // appended in place, into the row
	default:
		// A third entry: the append moved the log into a new array.
		r.spill, r.n = &logSpill{log: log}, 0
	}
	return exp
}

// logRows is the sliding-log layout.
type logRows struct{ rows[logRow] }

func (x *logRows) key(e int) (*[inlineKey]byte, *uint32) { r := &x.r[e]; return &r.kb, &r.ref }
func (x *logRows) add(k keyHead)                         { x.r = push(x.r, logRow{kb: k.bytes(), ref: k.ref}) }

func (x *logRows) get(e int) model.State {
	count, log := x.r[e].state()
	return model.State{Count: count, Log: log}
}

func (x *logRows) set(e int, s model.State) { x.r[e].setState(s.Count, s.Log) }

func (x *logRows) take(c *compiled, e int, now, cost, limit int64, d *sluice.Decision) (exp int64) {
	exp = takeLog(c, &x.r[e], now, cost, limit, d)
	return exp
}

// publish copies the log: an inline one into the words (its entry count,
// then up to two entries as At, Total), a spilled one as its base total
// and entry count, with arr pointing at the spill's array, which is
// shared from then on (see logSpill).
func (x *logRows) publish(e int, w *hotWords) {
	r := &x.r[e]
	if sp := r.spill; sp != nil {
		if base, live := sp.view(); len(live) > 0 {
			sp.shared = true
			w.w[0].Store(base)
			w.w[1].Store(int64(len(live)))
			w.arr.Store(&live[0])
			return
		}
	}
	n := int64(r.n)
	if r.spill != nil {
		n = 0
	}
	w.w[0].Store(n)
	for i, x := range r.one {
		w.w[1+2*i].Store(x.At)
		w.w[2+2*i].Store(int64(x.Total))
	}
	w.arr.Store(nil)
}

func (*logRows) judge(c *compiled, v hotView, now, cost, limit int64) (d sluice.Decision, exp int64) {
	if v.arr != nil {
		// Published entries are never written again (hot.go).
		exp = c.model.JudgeSlidingLogLimit(v.w0, unsafe.Slice(v.arr, v.w1), now, cost, limit, &d)
		return d, exp
	}
	one := [2]model.LogEntry{{At: v.w1, Total: uint64(v.w2)}, {At: v.w3, Total: uint64(v.w4)}}
	exp = c.model.JudgeSlidingLogLimit(0, one[:v.w0], now, cost, limit, &d)
	return d, exp
}
