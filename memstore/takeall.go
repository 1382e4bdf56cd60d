// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// work is the evaluation of one request of a TakeAll batch. The first
// request of each (policy, key) owns the working copy of its state, which
// later requests on the same policy and key update.
type work struct {
	c     *compiled
	h     uint64
	sh    int // shard index
	owner int // index of the request owning the working copy

	// The working copy, on the owner only.
	st    model.State
	den   int64     // st.Frac is in units of 1/den (bucket kind)
	last  *compiled // the policy that last evaluated st
	wrote *compiled // the policy that last changed st (its expiry is st's), or nil: st consumed nothing

	// For a sliding-log key whose log the store holds in a spill: the
	// spill, with room made for every append of the batch, and the length
	// of the log the batch started from, so that the model appends into
	// the spill's array in place; appended counts the appends.
	takes    int // requests of the batch on the key with a positive cost
	spill    *logSpill
	live     int
	appended int
}

// batch is a TakeAll call in progress.
type batch struct {
	reqs []sluice.Request
	ws   []work
}

// holds reports whether entry e of table t is the key of a request of b.
func (b *batch) holds(t *table, e int) bool {
	for i := range b.ws {
		if w := &b.ws[i]; w.owner == i && w.c.pt == t.pt && t.is(e, new(headOf(b.reqs[i].Key)), b.reqs[i].Key) {
			return true
		}
	}
	return false
}

// ownerKey identifies a working copy in large batches.
type ownerKey struct {
	pt  *policyTable
	key string
}

// smallBatch is the batch size TakeAll handles without allocating.
const smallBatch = 8

// TakeAll applies reqs all-or-nothing, as sluice.Store documents: in order,
// each seeing the effect of those before it (the same policy and key twice
// sees its earlier admission); if every request is admitted they are all
// recorded, otherwise none is, and the requests that would have been
// admitted report their unconsumed state as a cost-0 peek would. It locks
// every shard involved, in shard order, for the whole batch.
//
// If a key of the batch cannot be stored because WithMaxKeys leaves no room
// in its shard beside the batch's other keys, its admission is forgotten
// (counted in Stats.ForcedEvictions).
//
// Its errors: ErrClosed after Close; the context's error if it is already
// done; out and reqs of different lengths, an invalid policy or a negative
// cost (naming the request), all before anything is decided;
// sluice.ErrStoreFull when a policy of the batch is one the store does not
// hold and it holds WithMaxPolicies of them (before anything is decided),
// or when a key's table can hold no more keys (the batch is decided, and
// that key's admission is not recorded).
func (s *Store) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	if s.closed.Load() {
		return fmt.Errorf("memstore: take all: %w", ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: take all: %w", err)
	}
	if len(out) != len(reqs) {
		return fmt.Errorf("memstore: take all: %d decisions for %d requests: lengths must be equal", len(out), len(reqs))
	}
	if len(reqs) == 0 {
		return nil
	}
	var wbuf [smallBatch]work
	var sbuf [smallBatch]int
	ws, shards := wbuf[:0], sbuf[:0]
	if len(reqs) > smallBatch {
		ws, shards = make([]work, 0, len(reqs)), make([]int, 0, len(reqs))
	}
	// Every policy of the batch is pinned: none dies while the batch runs.
	var pbuf [smallBatch]*compiled
	pinned := pbuf[:0]
	defer func() {
		for _, c := range pinned {
			s.unpin(c)
		}
	}()
	var owners map[ownerKey]int
	if len(reqs) > 4*smallBatch {
		owners = make(map[ownerKey]int, len(reqs))
	}
	for i, r := range reqs {
		if r.Cost < 0 {
			return fmt.Errorf("memstore: take all: request %d (key %q): cost %d: must be >= 0", i, r.Key, r.Cost)
		}
		c, err := s.pin(r.Policy)
		if err != nil {
			return fmt.Errorf("memstore: take all: request %d (key %q): %w", i, r.Key, err)
		}
		pinned = append(pinned, c)
		h := maphash.String(s.seed, r.Key)
		w := work{c: c, h: h, sh: int(h >> s.shift), owner: i}
		if owners != nil {
			k := ownerKey{c.pt, r.Key}
			if j, ok := owners[k]; ok {
				w.owner = j
			} else {
				owners[k] = i
			}
		} else {
			for j := range i {
				if ws[j].owner == j && ws[j].c.pt == c.pt && reqs[j].Key == r.Key {
					w.owner = j
					break
				}
			}
		}
		ws = append(ws, w)
		if r.Cost > 0 {
			ws[w.owner].takes++
		}
		shards = append(shards, w.sh)
	}
	slices.Sort(shards)
	shards = slices.Compact(shards)
	for _, i := range shards {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range shards {
			s.shards[i].mu.Unlock()
		}
	}()

	now := s.now()
	refused := false
	for i, r := range reqs {
		w := &ws[i]
		o := &ws[w.owner]
		if w.owner == i {
			if sh, t := &s.shards[w.sh], s.shards[w.sh].table(w.c.pt); t != nil {
				if _, e := t.find(w.h, r.Key); e >= 0 {
					sh.retireIf(t, e) // the batch may change its row
					o.st = t.stateOn(e, w.c)
					if w.c.kind == logKind && o.takes > 0 {
						if sp := t.logRow(e).spill; sp != nil {
							sp.makeRoom(o.takes)
							o.st.Count, o.st.Log = sp.view()
							o.spill, o.live = sp, len(o.st.Log)
						} else {
							// An inline log is the row itself, which a later
							// change of the rows may move or clear: work on
							// a copy, with room for the batch's appends.
							o.st.Log = append(make([]model.LogEntry, 0, len(o.st.Log)+o.takes), o.st.Log...)
						}
					}
				}
			}
			o.den = w.c.den
		} else if w.c.kind == bucketKind && o.den != w.c.den {
			o.st.Time, o.st.Frac = convFrac(o.st.Time, o.st.Frac, o.den, w.c.den)
			o.den = w.c.den
		}
		var next model.State
		var d sluice.Decision
		// w.c decides r.Policy under its Burst or Limit (compiled.decides).
		// The model's entry points are called directly: a shared helper
		// would pass the State and Decision through one more frame.
		bucket := w.c.kind == bucketKind
		switch {
		case r.Force && bucket: // a charge: recorded past the limit, never refuses
			next, d = w.c.model.ChargeBurst(o.st, now, r.Cost, r.Policy.Burst)
		case r.Force:
			next, d = w.c.model.ChargeLimit(o.st, now, r.Cost, r.Policy.Limit)
		case bucket:
			next, d = w.c.model.TakeBurst(o.st, now, r.Cost, r.Policy.Burst)
			refused = refused || !d.Allowed
		default:
			next, d = w.c.model.TakeLimit(o.st, now, r.Cost, r.Policy.Limit)
			refused = refused || !d.Allowed
		}
		o.st, o.last = next, w.c
		if (d.Allowed || r.Force) && r.Cost > 0 {
			o.appended++
			o.wrote = w.c
		}
		out[i] = d
	}

	if refused {
		for i, r := range reqs {
			if !out[i].Allowed && !r.Force {
				continue
			}
			w := &ws[i]
			var st model.State
			if t := s.shards[w.sh].table(w.c.pt); t != nil {
				if _, e := t.find(w.h, r.Key); e >= 0 {
					st = t.stateOn(e, w.c)
				}
			}
			if w.c.kind == bucketKind {
				_, out[i] = w.c.model.TakeBurst(st, now, 0, r.Policy.Burst)
			} else {
				_, out[i] = w.c.model.TakeLimit(st, now, 0, r.Policy.Limit)
			}
		}
		return nil
	}

	b := batch{reqs: reqs, ws: ws}
	var err error
	for i, r := range reqs {
		w := &ws[i]
		if w.owner != i {
			continue
		}
		sh := &s.shards[w.sh]
		c := w.last
		if w.wrote != nil {
			// Not a later request that only read it: a policy of the same
			// name with a shorter period may see idle the state a longer
			// one just wrote.
			c = w.wrote
		}
		exp := c.model.ExpiresAt(w.st)
		if t := sh.table(c.pt); t != nil {
			if slot, e := t.find(w.h, r.Key); e >= 0 {
				if w.wrote == nil {
					// w.st may be an inline sliding-log row read in place,
					// and an earlier key of the batch may have moved the
					// row since: read it where it is now.
					exp = c.model.ExpiresAt(t.get(e))
				}
				switch {
				case exp <= now && !t.outlives(c, t.get(e), now):
					sh.remove(t, slot, e)
					sh.expired.Add(1)
				case w.wrote != nil && w.spill != nil && w.spill == t.logRow(e).spill:
					w.spill.committed(w.live, w.appended, len(w.st.Log))
					sh.wrote(exp)
				case w.wrote != nil:
					sh.recompile(t, w.last) // w.st's grid
					t.set(e, w.st)
					sh.wrote(exp)
				}
				continue
			}
		}
		if w.wrote == nil || exp <= now {
			continue
		}
		if sh.quota > 0 && sh.n >= sh.quota && !sh.makeRoom(now, &b) {
			sh.forced.Add(1)
			continue
		}
		t := sh.tableFor(c, s.seed) // pinned: not nil
		sh.recompile(t, w.last)     // w.st's grid
		e := t.insert(w.h, r.Key)
		if e < 0 {
			if t.len() == 0 {
				sh.dropTable(t)
			}
			err = fmt.Errorf("memstore: take all: request %d (key %q): %w", i, r.Key, errFull)
			continue
		}
		t.set(e, w.st)
		sh.wrote(exp)
		sh.added()
	}
	return err
}
