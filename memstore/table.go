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
// index (linear probing, backward-shift deletion) of uint32 slots into dense
// per-entry columns, with the key bytes in a byte arena. Entries are kept
// dense: removing one moves the last entry into its place. Every method
// runs under the shard's lock.
type table struct {
	pt   *policyTable
	kind kind
	den  int64 // denominator of the Frac columns (bucket kind)
	seed maphash.Seed

	slots []uint32
	keys  []uint32 // entry → offset in arena of uvarint(len(key)) ‖ key
	arena []byte
	dead  int // arena bytes of removed keys

	// State columns, indexed by entry. Only those of the kind are used.
	time  []int64
	frac  []uint32 // bucket kind with den < 2³²
	fracW []int64  // bucket kind with den ≥ 2³²
	count []int64
	prev  []int64
	logs  [][]sluice.LogEntry
}

func newTable(pt *policyTable, c *compiled, seed maphash.Seed) *table {
	return &table{pt: pt, kind: c.kind, den: c.den, seed: seed}
}

// len returns the number of entries.
func (t *table) len() int { return len(t.keys) }

// home returns the preferred slot of hash h in an index of n slots.
func home(h uint64, n int) int { return int((h & math.MaxUint32) * uint64(n) >> 32) }

// tagOf returns the slot tag of hash h (bits the home slot does not use).
func tagOf(h uint64) uint32 { return (uint32(h>>32) & 0xff) << idxBits }

// keyBytes returns the key of entry e; the slice aliases the arena.
func (t *table) keyBytes(e int) []byte {
	b := t.arena[t.keys[e]:]
	if b[0] < 0x80 {
		return b[1 : 1+int(b[0])]
	}
	n, w := binary.Uvarint(b)
	return b[w : w+int(n)]
}

func (t *table) hashOf(e int) uint64 { return maphash.Bytes(t.seed, t.keyBytes(e)) }

// find returns the slot and entry of key (hash h), or entry -1.
func (t *table) find(h uint64, key string) (slot, e int) {
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
			if e := int(s&idxMask) - 1; string(t.keyBytes(e)) == key {
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
	e := len(t.keys)
	if e >= maxEntries {
		return -1
	}
	if uint64(len(t.arena))+uint64(len(key))+binary.MaxVarintLen64 > math.MaxUint32 {
		t.compact()
		if uint64(len(t.arena))+uint64(len(key))+binary.MaxVarintLen64 > math.MaxUint32 {
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
	off := len(t.arena)
	t.arena = binary.AppendUvarint(t.arena, uint64(len(key)))
	t.arena = append(t.arena, key...)
	t.keys = append(t.keys, uint32(off))
	t.pushRow()
	t.slots[i] = tagOf(h) | uint32(e+1)
	return e
}

// remove deletes entry e, which slot points at.
func (t *table) remove(slot, e int) {
	kb := t.keyBytes(e)
	t.dead += len(kb) + uvarintLen(len(kb))
	t.deleteSlot(slot)
	last := len(t.keys) - 1
	if e != last {
		ls := t.slotOf(last)
		t.slots[ls] = t.slots[ls]&^idxMask | uint32(e+1)
		t.keys[e] = t.keys[last]
		t.moveRow(e, last)
	}
	t.keys = t.keys[:last]
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
	for e := range t.keys {
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

// compact copies the live keys into a fresh arena.
func (t *table) compact() {
	arena := make([]byte, 0, len(t.arena)-t.dead)
	for e := range t.keys {
		kb := t.keyBytes(e)
		t.keys[e] = uint32(len(arena))
		arena = binary.AppendUvarint(arena, uint64(len(kb)))
		arena = append(arena, kb...)
	}
	t.arena, t.dead = arena, 0
}

// reset releases everything of an empty table.
func (t *table) reset() {
	*t = table{pt: t.pt, kind: t.kind, den: t.den, seed: t.seed}
}

func uvarintLen(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }

func (t *table) wide() bool { return t.den >= wideDen }

func (t *table) pushRow() {
	switch t.kind {
	case bucketKind:
		t.time = append(t.time, 0)
		if t.wide() {
			t.fracW = append(t.fracW, 0)
		} else {
			t.frac = append(t.frac, 0)
		}
	case fixedKind:
		t.time = append(t.time, 0)
		t.count = append(t.count, 0)
	case slidingKind:
		t.time = append(t.time, 0)
		t.count = append(t.count, 0)
		t.prev = append(t.prev, 0)
	case logKind:
		t.count = append(t.count, 0)
		t.logs = append(t.logs, nil)
	}
}

func (t *table) moveRow(dst, src int) {
	switch t.kind {
	case bucketKind:
		t.time[dst] = t.time[src]
		if t.wide() {
			t.fracW[dst] = t.fracW[src]
		} else {
			t.frac[dst] = t.frac[src]
		}
	case fixedKind:
		t.time[dst] = t.time[src]
		t.count[dst] = t.count[src]
	case slidingKind:
		t.time[dst] = t.time[src]
		t.count[dst] = t.count[src]
		t.prev[dst] = t.prev[src]
	case logKind:
		t.count[dst] = t.count[src]
		t.logs[dst] = t.logs[src]
	}
}

// truncRows cuts the columns to n entries.
func (t *table) truncRows(n int) {
	switch t.kind {
	case bucketKind:
		t.time = t.time[:n]
		if t.wide() {
			t.fracW = t.fracW[:n]
		} else {
			t.frac = t.frac[:n]
		}
	case fixedKind:
		t.time = t.time[:n]
		t.count = t.count[:n]
	case slidingKind:
		t.time = t.time[:n]
		t.count = t.count[:n]
		t.prev = t.prev[:n]
	case logKind:
		t.count = t.count[:n]
		t.logs[n] = nil // release the removed entry's log
		t.logs = t.logs[:n]
	}
}

// shrinkColumns reallocates columns that are mostly unused capacity.
func (t *table) shrinkColumns() {
	t.keys = shrink(t.keys)
	t.time = shrink(t.time)
	t.frac = shrink(t.frac)
	t.fracW = shrink(t.fracW)
	t.count = shrink(t.count)
	t.prev = shrink(t.prev)
	t.logs = shrink(t.logs)
}

func shrink[T any](s []T) []T {
	if cap(s) <= 2*len(s)+8 {
		return s
	}
	return append(make([]T, 0, len(s)+len(s)/4), s...)
}

// get returns the state of entry e. A sliding-log state shares the stored
// log's backing array.
func (t *table) get(e int) sluice.State {
	switch t.kind {
	case bucketKind:
		if t.wide() {
			return sluice.State{Time: t.time[e], Frac: t.fracW[e]}
		}
		return sluice.State{Time: t.time[e], Frac: int64(t.frac[e])}
	case fixedKind:
		return sluice.State{Time: t.time[e], Count: t.count[e]}
	case slidingKind:
		return sluice.State{Time: t.time[e], Count: t.count[e], Prev: t.prev[e]}
	default:
		return sluice.State{Count: t.count[e], Log: t.logs[e]}
	}
}

// set stores s as the state of entry e. For the bucket kind s.Frac must be
// in units of 1/t.den.
func (t *table) set(e int, s sluice.State) {
	switch t.kind {
	case bucketKind:
		t.time[e] = s.Time
		if t.wide() {
			t.fracW[e] = s.Frac
		} else {
			t.frac[e] = uint32(s.Frac)
		}
	case fixedKind:
		t.time[e], t.count[e] = s.Time, s.Count
	case slidingKind:
		t.time[e], t.count[e], t.prev[e] = s.Time, s.Count, s.Prev
	case logKind:
		t.count[e], t.logs[e] = s.Count, s.Log
	}
}

// expiresAt returns when entry e's state becomes equivalent to none, under
// the policy's current parameters.
func (t *table) expiresAt(e int) int64 {
	return t.pt.cur.Load().model.ExpiresAt(t.get(e))
}

// setDen re-expresses the stored fractions in units of 1/den, rounding up
// (a TAT never moves earlier), when a reconfigured policy changed the
// denominator.
func (t *table) setDen(den int64) {
	if t.kind != bucketKind || t.den == den {
		return
	}
	old := t.den
	n := len(t.keys)
	fracW := t.fracW
	if den >= wideDen && old < wideDen {
		fracW = make([]int64, n, cap(t.frac))
	}
	var frac []uint32
	if den < wideDen {
		frac = t.frac
		if old >= wideDen {
			frac = make([]uint32, n, cap(t.fracW))
		}
	}
	for e := range n {
		var f int64
		if old >= wideDen {
			f = t.fracW[e]
		} else {
			f = int64(t.frac[e])
		}
		ns, nf := convFrac(t.time[e], f, old, den)
		t.time[e] = ns
		if den >= wideDen {
			fracW[e] = nf
		} else {
			frac[e] = uint32(nf)
		}
	}
	if den >= wideDen {
		t.fracW, t.frac = fracW, nil
	} else {
		t.frac, t.fracW = frac, nil
	}
	t.den = den
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
