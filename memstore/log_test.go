// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestTakeAllLogRowMoved: a TakeAll batch that drops an expired
// sliding-log key moves the table's last row into its place. A key of the
// same batch held in that last row, with its one log entry in the row,
// keeps its state: the batch must not read it from where the row was.
func TestTakeAllLogRowMoved(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), withShards(1))
	defer s.Close()
	ctx := context.Background()
	p := sluice.Policy{Algorithm: sluice.SlidingLog, Limit: 10, Period: time.Second}
	take := func(key string, cost int64) sluice.Decision {
		t.Helper()
		d, err := s.Take(ctx, p, key, cost)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	take("b", 1) // row 0
	clock.Advance(500 * time.Millisecond)
	take("a", 3) // row 1, the last
	clock.Advance(501 * time.Millisecond)
	// b's entry has left the window, a's has not.
	reqs := []sluice.Request{
		{Policy: p, Key: "b", Cost: 0},
		{Policy: p, Key: "a", Cost: 0},
	}
	out := make([]sluice.Decision, len(reqs))
	if err := s.TakeAll(ctx, reqs, out); err != nil {
		t.Fatal(err)
	}
	if out[1].Remaining != 7 {
		t.Fatalf("peek of a in the batch: remaining %d, want 7", out[1].Remaining)
	}
	if n := s.Len(); n != 1 {
		t.Errorf("after the batch the store holds %d keys, want 1 (a)", n)
	}
	if d := take("a", 0); d.Remaining != 7 {
		t.Errorf("a after the batch: remaining %d, want 7 (its state was lost)", d.Remaining)
	}
	// The same with a batch that writes to the moved key: its new entry
	// and its old one both stay.
	take("x", 1)
	clock.Advance(500 * time.Millisecond)
	take("y", 3) // the last row
	clock.Advance(501 * time.Millisecond)
	reqs = []sluice.Request{
		{Policy: p, Key: "x", Cost: 0},
		{Policy: p, Key: "y", Cost: 2},
	}
	if err := s.TakeAll(ctx, reqs, out); err != nil || !out[1].Allowed {
		t.Fatal(out, err)
	}
	if d := take("y", 0); d.Remaining != 5 {
		t.Errorf("y after a writing batch: remaining %d, want 5", d.Remaining)
	}
}

// TestSlidingLogMemory: a burst fills a key's log; when the traffic thins
// out, the log's backing array shrinks rather than pinning the burst.
func TestSlidingLogMemory(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	p := sluice.Policy{Algorithm: sluice.SlidingLog, Limit: 1000, Period: time.Second}
	ctx := context.Background()
	for range 1000 {
		s.Take(ctx, p, "k", 1)
	}
	logCap := func() int {
		c, _ := s.compile(p)
		for i := range s.shards {
			if tb := s.shards[i].table(c.pt.id); tb != nil && tb.len() > 0 {
				_, log := tb.lrows[0].state()
				return cap(log)
			}
		}
		return -1
	}
	if c := logCap(); c < 1000 || c > 4000 {
		t.Fatalf("after a burst of 1000: cap %d", c)
	}
	// One request per 700ms: at most two live entries.
	clock.Advance(time.Second)
	for i := range 3000 {
		clock.Advance(700 * time.Millisecond)
		if d, _ := s.Take(ctx, p, "k", 1); !d.Allowed {
			t.Fatalf("request %d refused", i)
		}
	}
	if c := logCap(); c > 32 {
		t.Errorf("after sparse traffic: cap %d, want the array shrunk", c)
	}
}

func TestLogRoom(t *testing.T) {
	mk := func(ats ...int64) []sluice.LogEntry {
		l := make([]sluice.LogEntry, len(ats))
		for i, at := range ats {
			l[i] = sluice.LogEntry{At: at, Total: uint64(100 + i + 1)}
		}
		return l
	}
	// Room left: unchanged.
	l := append(make([]sluice.LogEntry, 0, 4), mk(1, 2)...)
	if got, c := logRoom(l, 100, 5, 1); len(got) != 2 || c != 100 || &got[0] != &l[0] {
		t.Errorf("with room: %v %d", got, c)
	}
	// Full with four expired entries: pruned in place into the base total.
	l = mk(1, 2, 3, 4, 8, 9, 10, 11)
	got, c := logRoom(l, 100, 4, 1)
	if len(got) != 4 || c != 104 || got[0].At != 8 || &got[0] != &l[0] || cap(got) != 8 {
		t.Errorf("full, 4 expired: %v %d (cap %d)", got, c, cap(got))
	}
	// Pruning leaves too little room for three more: grows.
	l = mk(1, 2, 3, 4, 8, 9, 10, 11)
	if got, c := logRoom(l, 100, 4, 3); len(got) != 4 || c != 104 || cap(got) < 7 || cap(got)-len(got) < 3 || got[0].At != 8 {
		t.Errorf("full, 4 expired, need 3: %v %d (cap %d)", got, c, cap(got))
	}
	// Full with nothing expired: grows.
	l = mk(6, 7, 8, 9)
	if got, c := logRoom(l, 100, 2, 1); len(got) != 4 || cap(got) < 8 || c != 100 {
		t.Errorf("full, none expired: %v %d (cap %d)", got, c, cap(got))
	}
}
