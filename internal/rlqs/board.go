// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Entry is one stream's record in a division: the demand it reported
// (requests per second, negative while unknown) and the share it was
// granted (units per fill interval).
type Entry struct {
	Stream string
	Demand float64
	Grant  int64
}

// Claim asks a division for a share for one stream.
type Claim struct {
	Stream string
	Demand float64
	Want   int64
}

// Board is where the replicas of a fleet keep the records of each division:
// which streams report a bucket, their demands and their shares. Every
// replica of a fleet must see the same board (memory: one replica; Redis:
// any number).
//
// The board keeps one invariant: the grants of a division's live records
// sum to at most its budget. Claim makes its claims in order, each
// atomically: a claim gets what it wants, but no more than the budget less
// the grants of the division's other live records (so a claim that wants
// less than its record holds always gets it, and one that wants more waits
// for the others to give up theirs). Records live for the ttl of their
// last claim (measured on the now the caller passes).
type Board interface {
	// Read returns the division's live records, sorted by stream.
	Read(ctx context.Context, division string, now time.Time) ([]Entry, error)
	// Claim makes claims in order, as described above, and returns the
	// grant of each.
	Claim(ctx context.Context, division string, budget int64, now time.Time, ttl time.Duration, claims []Claim) ([]int64, error)
	// Drop removes stream's record at once if it expires no later than
	// before: a record claimed since (a bucket that left and came back)
	// is kept.
	Drop(ctx context.Context, division, stream string, before time.Time) error
}

// NewMemoryBoard returns a board in this process's memory: divisions are
// shared by the streams of one replica only.
func NewMemoryBoard() Board { return &memBoard{divs: map[string]map[string]memRecord{}} }

type memBoard struct {
	mu   sync.Mutex
	divs map[string]map[string]memRecord
}

type memRecord struct {
	demand  float64
	grant   int64
	expires time.Time
}

// live drops the expired records of division and returns the rest (nil if
// none).
func (b *memBoard) live(division string, now time.Time) map[string]memRecord {
	d := b.divs[division]
	for s, r := range d {
		if !now.Before(r.expires) {
			delete(d, s)
		}
	}
	if len(d) == 0 {
		delete(b.divs, division)
		return nil
	}
	return d
}

func (b *memBoard) Read(_ context.Context, division string, now time.Time) ([]Entry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.live(division, now)
	out := make([]Entry, 0, len(d))
	for s, r := range d {
		out = append(out, Entry{Stream: s, Demand: r.demand, Grant: r.grant})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out, nil
}

func (b *memBoard) Claim(_ context.Context, division string, budget int64, now time.Time, ttl time.Duration, claims []Claim) ([]int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.live(division, now)
	if d == nil {
		d = map[string]memRecord{}
		b.divs[division] = d
	}
	grants := make([]int64, len(claims))
	for i, c := range claims {
		var others int64
		for s, r := range d {
			if s != c.Stream {
				others += r.grant
			}
		}
		g := max(min(c.Want, budget-others), 0)
		d[c.Stream] = memRecord{demand: c.Demand, grant: g, expires: now.Add(ttl)}
		grants[i] = g
	}
	return grants, nil
}

func (b *memBoard) Drop(_ context.Context, division, stream string, before time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.divs[division]; d != nil {
		if r, ok := d[stream]; ok && !r.expires.After(before) {
			delete(d, stream)
		}
		if len(d) == 0 {
			delete(b.divs, division)
		}
	}
	return nil
}
