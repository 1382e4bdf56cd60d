// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"encoding/binary"
	"math/bits"

	"github.com/sluicehq/sluice/model"
)

// This file holds a table's rows: their layouts, the key bytes a row
// holds, and the reads and writes of a row's state. table.go holds the
// index that finds a row.

// layout selects the row type of a table.
type layout uint8

const (
	narrowLayout  layout = iota // bucket kind, den < 2³²
	wideLayout                  // bucket kind, den ≥ 2³²
	fixedLayout                 // fixed-window
	slidingLayout               // sliding-window
	logLayout                   // sliding-log
)

func layoutOf(k kind, den int64) layout {
	switch k {
	case fixedKind:
		return fixedLayout
	case slidingKind:
		return slidingLayout
	case logKind:
		return logLayout
	}
	if den >= wideDen {
		return wideLayout
	}
	return narrowLayout
}

// The rows. kb is the key's first inlineKey bytes, zero-padded; ref is
// inlined|len(key) for a key of at most inlineKey bytes, else the offset of
// the rest of the key in the arena (below inlined). logRow, of sliding-log,
// is in logrow.go.
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

// pushRow appends a row with the zero state for the key k.
func (t *table) pushRow(k keyHead) {
	kb := k.bytes()
	switch t.lay {
	case narrowLayout:
		t.nrows = push(t.nrows, narrowRow{kb: kb, ref: k.ref})
	case wideLayout:
		t.wrows = push(t.wrows, wideRow{kb: kb, ref: k.ref})
	case fixedLayout:
		t.frows = push(t.frows, fixedRow{kb: kb, ref: k.ref})
	case slidingLayout:
		t.srows = push(t.srows, slidingRow{kb: kb, ref: k.ref})
	default:
		t.lrows = push(t.lrows, logRow{kb: kb, ref: k.ref})
	}
	t.n++
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

func (t *table) moveRow(dst, src int) {
	switch t.lay {
	case narrowLayout:
		t.nrows[dst] = t.nrows[src]
	case wideLayout:
		t.wrows[dst] = t.wrows[src]
	case fixedLayout:
		t.frows[dst] = t.frows[src]
	case slidingLayout:
		t.srows[dst] = t.srows[src]
	default:
		t.lrows[dst] = t.lrows[src]
	}
}

// truncRows cuts the rows to n.
func (t *table) truncRows(n int) {
	switch t.lay {
	case narrowLayout:
		t.nrows = t.nrows[:n]
	case wideLayout:
		t.wrows = t.wrows[:n]
	case fixedLayout:
		t.frows = t.frows[:n]
	case slidingLayout:
		t.srows = t.srows[:n]
	default:
		t.lrows[n] = logRow{} // release the removed entry's log
		t.lrows = t.lrows[:n]
	}
	t.n = n
}

// shrinkColumns reallocates rows that are mostly unused capacity.
func (t *table) shrinkColumns() {
	t.nrows = shrink(t.nrows)
	t.wrows = shrink(t.wrows)
	t.frows = shrink(t.frows)
	t.srows = shrink(t.srows)
	t.lrows = shrink(t.lrows)
}

func shrink[T any](s []T) []T {
	if cap(s) <= 2*len(s)+8 {
		return s
	}
	return append(make([]T, 0, len(s)+len(s)/4), s...)
}

// get returns the state of entry e. A sliding-log state shares the stored
// log (see logRow.state): it must not be kept past the next change of the
// table's rows.
func (t *table) get(e int) model.State {
	switch t.lay {
	case narrowLayout:
		r := &t.nrows[e]
		return model.State{Time: r.time, Frac: int64(r.frac)}
	case wideLayout:
		r := &t.wrows[e]
		return model.State{Time: r.time, Frac: r.frac}
	case fixedLayout:
		r := &t.frows[e]
		return model.State{Time: r.time, Count: r.count}
	case slidingLayout:
		r := &t.srows[e]
		return model.State{Time: r.time, Count: r.count, Prev: r.prev}
	default:
		count, log := t.lrows[e].state()
		return model.State{Count: count, Log: log}
	}
}

// set stores s as the state of entry e. For the bucket kind s.Frac must be
// in units of 1/t.den.
func (t *table) set(e int, s model.State) {
	switch t.lay {
	case narrowLayout:
		r := &t.nrows[e]
		r.time, r.frac = s.Time, uint32(s.Frac)
	case wideLayout:
		r := &t.wrows[e]
		r.time, r.frac = s.Time, s.Frac
	case fixedLayout:
		r := &t.frows[e]
		r.time, r.count = s.Time, s.Count
	case slidingLayout:
		r := &t.srows[e]
		r.time, r.count, r.prev = s.Time, s.Count, s.Prev
	default:
		t.lrows[e].setState(s.Count, s.Log)
	}
}

// expiresAt returns when entry e's state becomes equivalent to none, under
// the policy's current parameters.
func (t *table) expiresAt(e int) int64 {
	return t.pt.cur.Load().model.ExpiresAt(t.get(e))
}

// setDen re-expresses the stored fractions in units of 1/den, rounding up
// (a TAT never moves earlier), when a reconfigured policy changed the
// denominator, switching between the narrow and wide rows as needed.
func (t *table) setDen(den int64) {
	if t.kind != bucketKind || t.den == den {
		return
	}
	old := t.den
	lay := layoutOf(bucketKind, den)
	switch {
	case t.lay == narrowLayout && lay == narrowLayout:
		for i := range t.nrows {
			r := &t.nrows[i]
			ns, f := convFrac(r.time, int64(r.frac), old, den)
			r.time, r.frac = ns, uint32(f)
		}
	case t.lay == wideLayout && lay == wideLayout:
		for i := range t.wrows {
			r := &t.wrows[i]
			r.time, r.frac = convFrac(r.time, r.frac, old, den)
		}
	case lay == wideLayout:
		rows := make([]wideRow, t.n, max(t.n, cap(t.nrows)))
		for i, r := range t.nrows {
			ns, f := convFrac(r.time, int64(r.frac), old, den)
			rows[i] = wideRow{kb: r.kb, time: ns, frac: f, ref: r.ref}
		}
		t.wrows, t.nrows = rows, nil
	default:
		rows := make([]narrowRow, t.n, max(t.n, cap(t.wrows)))
		for i, r := range t.wrows {
			ns, f := convFrac(r.time, r.frac, old, den)
			rows[i] = narrowRow{kb: r.kb, time: ns, frac: uint32(f), ref: r.ref}
		}
		t.nrows, t.wrows = rows, nil
	}
	t.lay, t.den = lay, den
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
