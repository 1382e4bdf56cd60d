// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"

	"github.com/sluicehq/sluice"
)

// kind selects the state columns a table keeps.
type kind uint8

const (
	bucketKind  kind = iota // Time (TAT) and Frac
	fixedKind               // Time (window start) and Count
	slidingKind             // Time, Count and Prev
	logKind                 // Count (base total) and Log
)

func kindOf(a sluice.Algorithm) kind {
	switch a {
	case sluice.FixedWindow:
		return fixedKind
	case sluice.SlidingWindow:
		return slidingKind
	case sluice.SlidingLog:
		return logKind
	}
	return bucketKind
}

// A slot of the open-addressing index is 0 when empty, else an 8-bit tag
// taken from the key's hash in the top bits and the entry number plus one in
// the low idxBits bits.
const (
	idxBits = 24
	idxMask = 1<<idxBits - 1
	// maxEntries is the most entries one table can hold.
	maxEntries = idxMask - 1
	// wideDen is the first denominator whose fractions need the int64 column.
	wideDen = 1 << 32
)

// table holds the keys of one policy within one shard: an open-addressing
// index (linear probing, backward-shift deletion) of uint32 slots into a
// dense slice of rows. A row is the key and its state, with no pointer for
// the bucket and window kinds. The first inlineKey bytes of the key are in
// the row, so a lookup of a key of at most that length touches the index
// and one row and nothing else; the rest of a longer key is in a byte arena.
// Rows are kept dense: removing one moves the last row into its place.
// Every method runs under the shard's lock.
type table struct {
	pt   *policyTable
	kind kind
	lay  layout
	den  int64 // denominator of the rows' Frac (bucket kind)
	seed maphash.Seed
	n    int // rows

	slots []uint32
	arena []byte // per key longer than inlineKey: uvarint(len(key)−inlineKey) ‖ key[inlineKey:]
	dead  int    // arena bytes of removed keys

	// The rows; only the slice of the layout is used.
	nrows []narrowRow
	wrows []wideRow
	frows []fixedRow
	srows []slidingRow
	lrows []logRow
}

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

func newTable(pt *policyTable, c *compiled, seed maphash.Seed) *table {
	return &table{pt: pt, kind: c.kind, lay: layoutOf(c.kind, c.den), den: c.den, seed: seed}
}

// len returns the number of entries.
func (t *table) len() int { return t.n }

// home returns the preferred slot of hash h in an index of n slots.
func home(h uint64, n int) int { return int((h & math.MaxUint32) * uint64(n) >> 32) }

// tagOf returns the slot tag of hash h (bits the home slot does not use).
func tagOf(h uint64) uint32 { return (uint32(h>>32) & 0xff) << idxBits }

// rowKey returns the inline key bytes and the ref of entry e.
func (t *table) rowKey(e int) (*[inlineKey]byte, *uint32) {
	switch t.lay {
	case narrowLayout:
		r := &t.nrows[e]
		return &r.kb, &r.ref
	case wideLayout:
		r := &t.wrows[e]
		return &r.kb, &r.ref
	case fixedLayout:
		r := &t.frows[e]
		return &r.kb, &r.ref
	case slidingLayout:
		r := &t.srows[e]
		return &r.kb, &r.ref
	default:
		r := &t.lrows[e]
		return &r.kb, &r.ref
	}
}

// tail returns the arena bytes of the key at ref (not inlined): the key
// past its first inlineKey bytes. The slice aliases the arena.
func (t *table) tail(ref uint32) []byte {
	b := t.arena[ref:]
	if b[0] < 0x80 {
		return b[1 : 1+int(b[0])]
	}
	n, w := binary.Uvarint(b)
	return b[w : w+int(n)]
}

// is reports whether entry e holds key, whose head is k.
func (t *table) is(e int, k *keyHead, key string) bool {
	kb, ref := t.rowKey(e)
	if binary.LittleEndian.Uint64(kb[:8]) != k.lo || binary.LittleEndian.Uint64(kb[8:]) != k.hi {
		return false
	}
	if k.ref != 0 || *ref&inlined != 0 {
		return *ref == k.ref
	}
	return string(t.tail(*ref)) == key[inlineKey:]
}

// keyOf returns the key of entry e, in a new string.
func (t *table) keyOf(e int) string {
	kb, ref := t.rowKey(e)
	if *ref&inlined != 0 {
		return string(kb[:*ref&^inlined])
	}
	return string(kb[:]) + string(t.tail(*ref))
}

// keyLen returns the length of the key of entry e and its arena bytes.
func (t *table) keyLen(e int) (n, arena int) {
	_, ref := t.rowKey(e)
	if *ref&inlined != 0 {
		return int(*ref &^ inlined), 0
	}
	tl := len(t.tail(*ref))
	return inlineKey + tl, tl + uvarintLen(tl)
}

// hashOf returns the hash of the key of entry e, as maphash.String of the
// key gives it.
func (t *table) hashOf(e int) uint64 {
	kb, ref := t.rowKey(e)
	if *ref&inlined != 0 {
		return maphash.Bytes(t.seed, kb[:*ref&^inlined])
	}
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.Write(kb[:])
	h.Write(t.tail(*ref))
	return h.Sum64()
}

// find returns the slot and entry of key (hash h), or entry -1.
func (t *table) find(h uint64, key string) (slot, e int) {
	k := headOf(key)
	return t.findHead(h, &k, key)
}

// findHead is find for a key whose head k is at hand.
func (t *table) findHead(h uint64, k *keyHead, key string) (slot, e int) {
	n := len(t.slots)
	if n == 0 {
		return -1, -1
	}
	tag := tagOf(h)
	i := home(h, n)
	for {
		s := t.slots[i]
		if s == 0 {
			return i, -1
		}
		if s&^idxMask == tag {
			if e := int(s&idxMask) - 1; t.is(e, k, key) {
				return i, e
			}
		}
		if i++; i == n {
			i = 0
		}
	}
}

// slotOf returns the slot that points at entry e.
func (t *table) slotOf(e int) int {
	n := len(t.slots)
	want := uint32(e + 1)
	i := home(t.hashOf(e), n)
	for t.slots[i]&idxMask != want {
		if i++; i == n {
			i = 0
		}
	}
	return i
}

// insert adds key (hash h, known to be absent) as a new entry with the zero
// state and returns it, or -1 when the table cannot grow any further.
func (t *table) insert(h uint64, key string) int {
	e := t.n
	if e >= maxEntries {
		return -1
	}
	if len(key) > inlineKey && uint64(len(t.arena))+uint64(len(key))+binary.MaxVarintLen64 >= inlined {
		t.compact()
		if uint64(len(t.arena))+uint64(len(key))+binary.MaxVarintLen64 >= inlined {
			return -1
		}
	}
	if 4*(e+1) > 3*len(t.slots) {
		t.rehash(max(8, 2*(e+1)))
	}
	n := len(t.slots)
	i := home(h, n)
	for t.slots[i] != 0 {
		if i++; i == n {
			i = 0
		}
	}
	k := headOf(key)
	if k.ref == 0 {
		k.ref = uint32(len(t.arena))
		t.arena = binary.AppendUvarint(t.arena, uint64(len(key)-inlineKey))
		t.arena = append(t.arena, key[inlineKey:]...)
	}
	t.pushRow(k)
	t.slots[i] = tagOf(h) | uint32(e+1)
	return e
}

// remove deletes entry e, which slot points at.
func (t *table) remove(slot, e int) {
	_, a := t.keyLen(e)
	t.dead += a
	t.deleteSlot(slot)
	last := t.n - 1
	if e != last {
		ls := t.slotOf(last)
		t.slots[ls] = t.slots[ls]&^idxMask | uint32(e+1)
		t.moveRow(e, last)
	}
	t.truncRows(last)
	switch {
	case last == 0:
		t.reset()
	case len(t.slots) > 64 && 8*last < len(t.slots):
		t.rehash(max(8, 2*last))
		t.shrinkColumns()
		t.compact()
	case t.dead > 1024 && 2*t.dead > len(t.arena):
		t.compact()
	}
}

// deleteSlot empties slot i, shifting back the entries that follow it in its
// probe run so that no lookup stops early.
func (t *table) deleteSlot(i int) {
	n := len(t.slots)
	j := i
	for {
		if j++; j == n {
			j = 0
		}
		s := t.slots[j]
		if s == 0 {
			break
		}
		h := home(t.hashOf(int(s&idxMask)-1), n)
		// The entry at j may fill the hole at i iff its home is not in the
		// cyclic interval (i, j].
		if (j-h+n)%n >= (j-i+n)%n {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = 0
}

// rehash rebuilds the index with n slots.
func (t *table) rehash(n int) {
	t.slots = make([]uint32, n)
	for e := range t.n {
		h := t.hashOf(e)
		i := home(h, n)
		for t.slots[i] != 0 {
			if i++; i == n {
				i = 0
			}
		}
		t.slots[i] = tagOf(h) | uint32(e+1)
	}
}

// compact copies the live key tails into a fresh arena.
func (t *table) compact() {
	if len(t.arena) == t.dead {
		t.arena, t.dead = nil, 0
		return
	}
	arena := make([]byte, 0, len(t.arena)-t.dead)
	for e := range t.n {
		_, ref := t.rowKey(e)
		if *ref&inlined != 0 {
			continue
		}
		tl := t.tail(*ref)
		*ref = uint32(len(arena))
		arena = binary.AppendUvarint(arena, uint64(len(tl)))
		arena = append(arena, tl...)
	}
	t.arena, t.dead = arena, 0
}

// reset releases everything of an empty table.
func (t *table) reset() {
	*t = table{pt: t.pt, kind: t.kind, lay: t.lay, den: t.den, seed: t.seed}
}

func uvarintLen(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }

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
func (t *table) get(e int) sluice.State {
	switch t.lay {
	case narrowLayout:
		r := &t.nrows[e]
		return sluice.State{Time: r.time, Frac: int64(r.frac)}
	case wideLayout:
		r := &t.wrows[e]
		return sluice.State{Time: r.time, Frac: r.frac}
	case fixedLayout:
		r := &t.frows[e]
		return sluice.State{Time: r.time, Count: r.count}
	case slidingLayout:
		r := &t.srows[e]
		return sluice.State{Time: r.time, Count: r.count, Prev: r.prev}
	default:
		count, log := t.lrows[e].state()
		return sluice.State{Count: count, Log: log}
	}
}

// set stores s as the state of entry e. For the bucket kind s.Frac must be
// in units of 1/t.den.
func (t *table) set(e int, s sluice.State) {
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
