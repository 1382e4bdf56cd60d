// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
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
	pos  int // index in the shard's tables
	kind kind
	den  int64 // denominator of the rows' Frac (bucket kind)
	seed maphash.Seed
	n    int // rows
	rs   rowSet

	slots []uint32
	arena []byte // per key longer than inlineKey: uvarint(len(key)−inlineKey) ‖ key[inlineKey:]
	dead  int    // arena bytes of removed keys

}

func newTable(pt *policyTable, c *compiled, seed maphash.Seed) *table {
	return &table{pt: pt, kind: c.kind, den: c.den, seed: seed, rs: newRows(c.kind, c.den)}
}

// len returns the number of entries.
func (t *table) len() int { return t.n }

// home returns the preferred slot of hash h in an index of n slots.
func home(h uint64, n int) int { return int((h & math.MaxUint32) * uint64(n) >> 32) }

// tagOf returns the slot tag of hash h (bits the home slot does not use).
func tagOf(h uint64) uint32 { return (uint32(h>>32) & 0xff) << idxBits }

// rowKey returns the inline key bytes and the ref of entry e.
func (t *table) rowKey(e int) (*[inlineKey]byte, *uint32) { return t.rs.key(e) }

// get returns the state of entry e (see rowSet.get).
func (t *table) get(e int) model.State { return t.rs.get(e) }

// set stores s as the state of entry e (see rowSet.set).
func (t *table) set(e int, s model.State) { t.rs.set(e, s) }

// logRow returns entry e of a sliding-log table.
func (t *table) logRow(e int) *logRow { return &t.rs.(*logRows).r[e] }

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
	t.rs.add(k)
	t.n++
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
		t.rs.move(e, last)
	}
	t.rs.trunc(last)
	t.n = last
	switch {
	case last == 0:
		t.reset()
	case len(t.slots) > 64 && 8*last < len(t.slots):
		t.rehash(max(8, 2*last))
		t.rs.shrink()
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
	t.slots, t.arena, t.dead = nil, nil, 0
	t.rs.shrink()
}

func uvarintLen(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }
