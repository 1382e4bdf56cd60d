// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"strings"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// Lock-free rejections of a hot key.
//
// A key asked for far over its limit (one client hammering, an attack) is
// rejected again and again, and a rejection changes nothing: the models
// write no state when they reject. Yet deciding it under the shard's lock
// makes every core that asks write the lock's cache line, and the cores
// queue for it: two cores decide no faster than one. So each shard may
// publish one key, its hot key, as a copy of the key's row that the shard's
// writers keep equal to the row; a take of that key first decides on the
// copy, with no lock and no write, and returns at once if the model rejects.
// Anything else (an admission, a peek, a state about to expire) is decided
// under the lock as before. Over the limit, a hot key's decisions then scale
// with the cores that ask.
//
// The copy is a seqlock: seq is odd while the shard's writer (holding the
// lock) rewrites the copy, and stays odd while the copy is retired (a
// revival rewrites the words, then makes it even). A reader reads seq, the
// words, and seq again, and uses the words only if seq was even and did not
// change; every field is read and written atomically, so the race detector
// checks it too. The copy is rewritten in the same critical section as an
// admission that changes the key's row, and retired before any other change
// of the row (the key removed by expiry, a sweep, an eviction or Reset; the
// table's policy recompiled; a batch or a Give on the key), so whenever seq
// is even the words are the row's state. A rejection decided on them is the
// one the lock would have given at that instant: exact, as every decision of
// the store. Batches (TakeAll) still decide under the locks.
//
// A spilled sliding-log copy points at the spill's array rather than copying
// it. Entries of an array once published are never written again (makeRoom
// compacts such an array into a new one; the others only append), so a
// reader reads them after checking seq, and reads what was published.
//
// A key becomes the shard's hot key when it is rejected under the lock and
// the shard has none; that allocates the copy (about 100 bytes and the key),
// or revives the last one if it was the same key's. Another key replaces it
// after hotAfter rejections in a row under the lock (the hot key's own
// rejections take no lock), and each replacement doubles that count, up to hotAfterMax, so
// that two hammered keys in one shard do not allocate a copy per rejection;
// the sweeper halves it back every interval. A hot key admitted hotAdmits
// times under the lock is retired: back under its limit, it would only pay
// for the copy.
type hotKey struct {
	// Set once, read without the lock.
	key string
	h   uint64
	c   *compiled
	rs  rowSet // the layout, for judge only: it reads no row
	t   *table // under the lock only

	live bool // under the lock: published in the shard's hot

	seq atomic.Uint64
	hotWords
}

// hotWords is a copy of a row's state, written by its layout's publish
// (rows.go, logrow.go): bucket: Time, Frac; fixed-window: Time, Count;
// sliding-window: Time, Count, Prev; sliding-log, when arr is nil: the
// entry count and up to two entries (At, Total) with base 0; else the base
// total and the count of entries at arr.
type hotWords struct {
	w   [5]atomic.Int64
	arr atomic.Pointer[model.LogEntry]
}

// hotView is hotWords as a reader loaded them. Its words are fields, not
// an array: an array argument is passed in memory, and copying the just
// loaded words there cost the lock-free rejection about 10 ns (a stalled
// store-to-load forwarding per word); fields travel in registers.
type hotView struct {
	w0, w1, w2, w3, w4 int64
	arr                *model.LogEntry
}

const (
	hotAfter    = 2
	hotAfterMax = 1 << 10
	hotAdmits   = 64
)

// publish copies the state of entry e of t, the copy's row, into the live
// copy; the caller holds the shard's lock.
func (he *hotKey) publish(t *table, e int) {
	he.seq.Add(1)
	he.write(t, e)
	he.seq.Add(1)
}

// revive makes a retired (or new) copy live again with the state of entry
// e of t; the caller holds the shard's lock.
func (he *hotKey) revive(t *table, e int) {
	he.write(t, e)
	he.seq.Add(1) // even: readable
	he.live = true
}

// write copies the state of entry e of t into the words, while seq is odd.
func (he *hotKey) write(t *table, e int) { t.rs.publish(e, &he.hotWords) }

// reject decides a take of cost at now under arg, the request's Burst or
// Limit (see compiled.decides), on the copy, and reports whether it set *d
// to a rejection that leaves the key as it is. false leaves *d
// unspecified: the caller decides under the lock.
func (he *hotKey) reject(now, cost, arg int64, d *sluice.Decision) bool {
	seq := he.seq.Load()
	if seq&1 != 0 {
		return false
	}
	v := hotView{he.w[0].Load(), he.w[1].Load(), he.w[2].Load(), he.w[3].Load(), he.w[4].Load(), he.arr.Load()}
	if he.seq.Load() != seq {
		return false
	}
	dec, exp := he.rs.judge(he.c, v, now, cost, arg)
	if dec.Allowed || exp <= now {
		return false
	}
	*d = dec
	return true
}

// retire makes the shard's hot key, if any, none: readers stop using its
// copy at once. The copy is kept (hotp) to be revived without allocating
// if the same key turns hot again. The caller holds the shard's lock.
func (sh *shard) retire() {
	if he := sh.hotp; he != nil && he.live {
		he.seq.Add(1) // odd until revived
		he.live = false
		sh.hot.Store(nil)
	}
}

// recompile readies table t for takes compiled as c: it re-expresses the
// rows' fractions for c (table.setDen), and retires the hot key if it is of
// t and was compiled otherwise, as its rows may be rewritten and its
// model is not c. The caller holds the shard's lock.
func (sh *shard) recompile(t *table, c *compiled) {
	if he := sh.hotp; he != nil && he.t == t && he.c != c {
		sh.retire()
	}
	t.setDen(c.den)
}

// retireIf retires the hot key if it is entry e of t, whose row is about to
// change other than by an admission, or be removed. The caller holds the
// shard's lock.
func (sh *shard) retireIf(t *table, e int) {
	he := sh.hotp
	if he == nil || !he.live || he.t != t {
		return
	}
	if k := headOf(he.key); t.is(e, &k, he.key) {
		sh.retire()
	}
}

// isHot reports whether key (hash h) of table t is the live hot key.
func (sh *shard) isHot(t *table, h uint64, key string) bool {
	he := sh.hotp
	return he != nil && he.live && he.h == h && he.t == t && he.key == key
}

// tookHot notes an admission of the hot key, entry e of t, under the lock:
// it republishes the row, and retires the key after hotAdmits of them (a
// key back under its limit should not keep paying for the copy).
func (sh *shard) tookHot(t *table, e int) {
	if sh.hotAdmits++; sh.hotAdmits >= hotAdmits {
		sh.retire()
		return
	}
	sh.hotp.publish(t, e)
}

// rejected notes that entry e of t, key (hash h) under c, was rejected
// under the lock. With no live hot key, the key becomes it. Else it replaces
// the hot key once it has been rejected under the lock hotBar times in a
// row (the hot key's own rejections take no lock, so they do not break the
// row), and the next replacement needs twice as many. The caller holds the
// shard's lock.
func (sh *shard) rejected(c *compiled, t *table, e int, h uint64, key string) {
	he := sh.hotp
	if he != nil && he.live {
		if sh.cand != h {
			sh.cand, sh.candN = h, 0
		}
		if sh.candN++; sh.candN < max(sh.hotBar, hotAfter) {
			return
		}
		sh.hotBar = min(2*max(sh.hotBar, hotAfter), hotAfterMax)
		sh.retire()
	}
	sh.cand, sh.candN, sh.hotAdmits = 0, 0, 0
	if he == nil || he.h != h || he.c != c || he.t != t || he.key != key {
		he = &hotKey{key: strings.Clone(key), h: h, c: c, rs: t.rs, t: t}
		he.seq.Add(1) // odd: not yet published
		sh.hotp = he
	}
	he.revive(t, e)
	sh.hot.Store(he)
}
