// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"encoding/binary"
	"math/bits"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// This file holds a table's rows: their layouts, the key bytes a row
// holds, and the reads and writes of a row's state. table.go holds the
// index that finds a row.

// rowSet is a table's rows, all of one layout: a row type holding a key's
// first inlineKey bytes, its ref and the columns of one model's state. Each
// layout is written once, as a row type and the methods of its rowSet
// (below, and logrow.go); what every layout does alike is rows[R], generic.
// newRows is the one place that chooses a layout.
type rowSet interface {
	len() int
	// key returns entry e's inline key bytes and its ref.
	key(e int) (*[inlineKey]byte, *uint32)
	// add appends a row for the key whose head is k, with the zero state.
	add(k keyHead)
	// move copies row src over row dst.
	move(dst, src int)
	// trunc cuts the rows to n, releasing what the cut rows held.
	trunc(n int)
	// shrink reallocates rows that are mostly unused capacity.
	shrink()
	// get returns entry e's state. A sliding-log state shares the stored
	// log (see logRow.state): it must not be kept past the next change of
	// the table's rows.
	get(e int) model.State
	// set stores s as entry e's state; for the bucket kind s.Frac must be
	// in units of 1/(the table's den).
	set(e int, s model.State)
	// take applies one request of cost at now, under arg (the request's
	// Burst for the bucket kinds, its Limit for the window kinds: see
	// compiled.decides), to entry e, running
	// c's model on the row in place, sets *d and returns the key's expiry. A
	// pointer passed through an interface escapes: d must not point into
	// the caller's stack, which would cost an allocation per decision
	// (the shard passes its scratch decision, under its lock, to the
	// layouts it does not call directly: see shard.takeInPlace).
	take(c *compiled, e int, now, cost, arg int64, d *sluice.Decision) int64
	// publish copies entry e's state into a hot key's words, while its
	// seq is odd (hot.go).
	publish(e int, w *hotWords)
	// judge decides one request on a hot key's copy v, as take would on
	// the row it copies, without writing anything, and returns the
	// expiry. It reads no row.
	judge(c *compiled, v hotView, now, cost, arg int64) (sluice.Decision, int64)
}

// newRows returns empty rows of the layout for kind k with fractions in
// units of 1/den: the bucket kind keeps its fraction in 32 bits while den
// allows.
func newRows(k kind, den int64) rowSet {
	switch k {
	case fixedKind:
		return new(fixedRows)
	case slidingKind:
		return new(slidingRows)
	case logKind:
		return new(logRows)
	}
	if den >= wideDen {
		return new(wideRows)
	}
	return new(narrowRows)
}

// rows is what every layout does alike.
type rows[R any] struct{ r []R }

func (x *rows[R]) len() int          { return len(x.r) }
func (x *rows[R]) move(dst, src int) { x.r[dst] = x.r[src] }

func (x *rows[R]) trunc(n int) {
	clear(x.r[n:])
	x.r = x.r[:n]
}

func (x *rows[R]) shrink() {
	if len(x.r) == 0 {
		x.r = nil
		return
	}
	x.r = shrink(x.r)
}

// The rows. kb is the key's first inlineKey bytes, zero-padded; ref is
// inlined|len(key) for a key of at most inlineKey bytes, else the offset of
// the rest of the key in the arena (below inlined). A key's ref is the
// same in every layout, and so is its keyHead. logRow, of sliding-log, is
// in logrow.go.
type (
	narrowRow struct {
		kb   [inlineKey]byte
		time int64
		frac uint32
		ref  uint32
	}
	wideRow struct {
		kb         [inlineKey]byte
		time, frac int64
		ref        uint32
	}
	fixedRow struct {
		kb          [inlineKey]byte
		time, count int64
		ref         uint32
	}
	slidingRow struct {
		kb                [inlineKey]byte
		time, count, prev int64
		ref               uint32
	}
)

const (
	// inlineKey is the number of key bytes a row holds.
	inlineKey = 16
	// inlined marks a row's ref as the length of a key held whole in the
	// row; refs below it are arena offsets, so the arena stays below it.
	inlined = 1 << 31
)

// keyHead is a key as the rows hold it: its first inlineKey bytes, as two
// little-endian words, and the ref a row of the key holds if the key is no
// longer than that (else 0). Words rather than a byte array keep it in
// registers and let is compare it with two word loads of the row.
type keyHead struct {
	lo, hi uint64
	ref    uint32
}

func headOf(key string) keyHead {
	if len(key) < inlineKey {
		return shortHead(key)
	}
	k := keyHead{lo: le64(key), hi: le64(key[8:])}
	if len(key) == inlineKey {
		k.ref = inlined | inlineKey
	}
	return k
}

// shortHead is headOf for a key shorter than inlineKey.
func shortHead(key string) keyHead {
	var b [inlineKey]byte
	copy(b[:], key)
	return keyHead{
		lo:  binary.LittleEndian.Uint64(b[:8]),
		hi:  binary.LittleEndian.Uint64(b[8:]),
		ref: inlined | uint32(len(key)),
	}
}

// le64 returns the first 8 bytes of s as a little-endian word; the
// compiler makes it one load.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// bytes returns the key bytes k holds, as a row holds them.
func (k *keyHead) bytes() (b [inlineKey]byte) {
	binary.LittleEndian.PutUint64(b[:8], k.lo)
	binary.LittleEndian.PutUint64(b[8:], k.hi)
	return b
}

// push appends r to rows. Past growSmall rows it grows the capacity by an
// eighth rather than append's quarter: rows are most of a key's memory, and
// a table of rows only grows by one at a time.
func push[T any](rows []T, r T) []T {
	if n := len(rows); n == cap(rows) && n >= growSmall {
		grown := make([]T, n, n+n/8)
		copy(grown, rows)
		rows = grown
	}
	return append(rows, r)
}

// growSmall is the row count below which push leaves growth to append.
const growSmall = 1024

func shrink[T any](s []T) []T {
	if cap(s) <= 2*len(s)+8 {
		return s
	}
	return append(make([]T, 0, len(s)+len(s)/4), s...)
}

// The layouts of the bucket and window kinds.
type (
	narrowRows  struct{ rows[narrowRow] }
	wideRows    struct{ rows[wideRow] }
	fixedRows   struct{ rows[fixedRow] }
	slidingRows struct{ rows[slidingRow] }
)

func (x *narrowRows) key(e int) (*[inlineKey]byte, *uint32) { r := &x.r[e]; return &r.kb, &r.ref }
func (x *narrowRows) add(k keyHead)                         { x.r = push(x.r, narrowRow{kb: k.bytes(), ref: k.ref}) }

func (x *narrowRows) get(e int) model.State {
	r := &x.r[e]
	return model.State{Time: r.time, Frac: int64(r.frac)}
}

func (x *narrowRows) set(e int, s model.State) {
	r := &x.r[e]
	r.time, r.frac = s.Time, uint32(s.Frac)
}

func (x *narrowRows) take(c *compiled, e int, now, cost, arg int64, d *sluice.Decision) (exp int64) {
	r := &x.r[e]
	tat, frac := r.time, int64(r.frac)
	exp = c.model.TakeBucketBurst(&tat, &frac, now, cost, arg, d)
	if d.Allowed && cost > 0 {
		r.time, r.frac = tat, uint32(frac)
	}
	return exp
}

func (x *narrowRows) publish(e int, w *hotWords) {
	r := &x.r[e]
	w.w[0].Store(r.time)
	w.w[1].Store(int64(r.frac))
}

func (*narrowRows) judge(c *compiled, v hotView, now, cost, arg int64) (d sluice.Decision, exp int64) {
	exp = c.model.TakeBucketBurst(&v.w0, &v.w1, now, cost, arg, &d)
	return d, exp
}

func (x *wideRows) key(e int) (*[inlineKey]byte, *uint32) { r := &x.r[e]; return &r.kb, &r.ref }
func (x *wideRows) add(k keyHead)                         { x.r = push(x.r, wideRow{kb: k.bytes(), ref: k.ref}) }

func (x *wideRows) get(e int) model.State {
	r := &x.r[e]
	return model.State{Time: r.time, Frac: r.frac}
}

func (x *wideRows) set(e int, s model.State) {
	r := &x.r[e]
	r.time, r.frac = s.Time, s.Frac
}

func (x *wideRows) take(c *compiled, e int, now, cost, arg int64, d *sluice.Decision) (exp int64) {
	r := &x.r[e]
	exp = c.model.TakeBucketBurst(&r.time, &r.frac, now, cost, arg, d)
	return exp
}

func (x *wideRows) publish(e int, w *hotWords) {
	r := &x.r[e]
	w.w[0].Store(r.time)
	w.w[1].Store(r.frac)
}

func (*wideRows) judge(c *compiled, v hotView, now, cost, arg int64) (d sluice.Decision, exp int64) {
	exp = c.model.TakeBucketBurst(&v.w0, &v.w1, now, cost, arg, &d)
	return d, exp
}

func (x *fixedRows) key(e int) (*[inlineKey]byte, *uint32) { r := &x.r[e]; return &r.kb, &r.ref }
func (x *fixedRows) add(k keyHead)                         { x.r = push(x.r, fixedRow{kb: k.bytes(), ref: k.ref}) }

func (x *fixedRows) get(e int) model.State {
	r := &x.r[e]
	return model.State{Time: r.time, Count: r.count}
}

func (x *fixedRows) set(e int, s model.State) {
	r := &x.r[e]
	r.time, r.count = s.Time, s.Count
}

func (x *fixedRows) take(c *compiled, e int, now, cost, limit int64, d *sluice.Decision) (exp int64) {
	r := &x.r[e]
	exp = c.model.TakeFixedWindowLimit(&r.time, &r.count, now, cost, limit, d)
	return exp
}

func (x *fixedRows) publish(e int, w *hotWords) {
	r := &x.r[e]
	w.w[0].Store(r.time)
	w.w[1].Store(r.count)
}

func (*fixedRows) judge(c *compiled, v hotView, now, cost, limit int64) (d sluice.Decision, exp int64) {
	exp = c.model.TakeFixedWindowLimit(&v.w0, &v.w1, now, cost, limit, &d)
	return d, exp
}

func (x *slidingRows) key(e int) (*[inlineKey]byte, *uint32) { r := &x.r[e]; return &r.kb, &r.ref }
func (x *slidingRows) add(k keyHead)                         { x.r = push(x.r, slidingRow{kb: k.bytes(), ref: k.ref}) }

func (x *slidingRows) get(e int) model.State {
	r := &x.r[e]
	return model.State{Time: r.time, Count: r.count, Prev: r.prev}
}

func (x *slidingRows) set(e int, s model.State) {
	r := &x.r[e]
	r.time, r.count, r.prev = s.Time, s.Count, s.Prev
}

func (x *slidingRows) take(c *compiled, e int, now, cost, limit int64, d *sluice.Decision) (exp int64) {
	r := &x.r[e]
	exp = c.model.TakeSlidingWindowLimit(&r.time, &r.count, &r.prev, now, cost, limit, d)
	return exp
}

func (x *slidingRows) publish(e int, w *hotWords) {
	r := &x.r[e]
	w.w[0].Store(r.time)
	w.w[1].Store(r.count)
	w.w[2].Store(r.prev)
}

func (*slidingRows) judge(c *compiled, v hotView, now, cost, limit int64) (d sluice.Decision, exp int64) {
	exp = c.model.TakeSlidingWindowLimit(&v.w0, &v.w1, &v.w2, now, cost, limit, &d)
	return d, exp
}

// expiresAt returns when entry e's state becomes equivalent to none, under
// the policy's current parameters or, for the window kinds, the longest
// period its name has had (see outlives), whichever is later.
func (t *table) expiresAt(e int) int64 {
	c := t.pt.cur.Load()
	if l := t.pt.longest.Load(); t.kind != bucketKind && l != nil && l.period > c.period {
		c = l
	}
	return c.model.ExpiresAt(t.get(e))
}

// outlives reports whether st, a state of t that is equivalent to none
// under c at now, still counts under a longer period that a policy of the
// same name has had: a window kind's request under a shorter period (a
// peek, a refusal, a sweep) must not drop a count that the longer one
// holds, as Redis keeps the key for its writer. The bucket kinds' states
// expire at their TAT, whatever the period.
func (t *table) outlives(c *compiled, st model.State, now int64) bool {
	l := t.pt.longest.Load()
	return t.kind != bucketKind && l != nil && l.period > c.period && l.model.ExpiresAt(st) > now
}

// stateOn returns the state of entry e as c reads it: for the bucket kind,
// with its TAT rounded up to c's grid (1/c.den ns), which it need not be
// stored on (see shard.takeOffGrid). Nothing is written.
func (t *table) stateOn(e int, c *compiled) model.State {
	st := t.get(e)
	if t.kind == bucketKind {
		st.Time, st.Frac = convFrac(st.Time, st.Frac, t.den, c.den)
	}
	return st
}

// setDen re-expresses the stored fractions in units of 1/den, rounding up
// (a TAT never moves earlier), when a reconfigured policy changed the
// denominator, moving the rows to the layout den needs.
func (t *table) setDen(den int64) {
	if t.kind != bucketKind || t.den == den {
		return
	}
	rs := t.rs
	if (t.den >= wideDen) != (den >= wideDen) {
		rs = newRows(bucketKind, den)
		for e := range t.n {
			kb, ref := t.rs.key(e)
			rs.add(keyHead{lo: binary.LittleEndian.Uint64(kb[:8]), hi: binary.LittleEndian.Uint64(kb[8:]), ref: *ref})
		}
	}
	for e := range t.n {
		st := t.rs.get(e)
		st.Time, st.Frac = convFrac(st.Time, st.Frac, t.den, den)
		rs.set(e, st)
	}
	t.rs, t.den = rs, den
}

// convFrac re-expresses the instant ns + frac/from as ns' + frac'/to,
// rounding up to the next 1/to.
func convFrac(ns, frac, from, to int64) (int64, int64) {
	if frac == 0 || from == to {
		return ns, frac
	}
	hi, lo := bits.Mul64(uint64(frac), uint64(to))
	q, r := bits.Div64(hi, lo, uint64(from)) // frac < from, so q < to
	if r != 0 {
		q++
	}
	if q == uint64(to) {
		return ns + 1, 0
	}
	return ns, int64(q)
}
