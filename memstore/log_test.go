// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

// logStore returns a one-shard store without a sweeper on a fake clock set
// to start, closed when the test ends, and take, which asks it for key
// under p and fails the test on an error.
func logStore(t *testing.T, start time.Time, p sluice.Policy) (*Store, *sluicetest.Clock, func(key string, cost int64) sluice.Decision) {
	t.Helper()
	clock := sluicetest.NewClock(start)
	s := New(WithClock(clock), WithSweepInterval(0), withShards(1))
	t.Cleanup(func() { s.Close() })
	take := func(key string, cost int64) sluice.Decision {
		t.Helper()
		d, err := s.Take(context.Background(), p, key, cost)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return s, clock, take
}

// TestTakeAllLogRowMoved: a TakeAll batch that drops an expired
// sliding-log key moves the table's last row into its place. A key of the
// same batch held in that last row, with its one log entry in the row,
// keeps its state: the batch must not read it from where the row was.
func TestTakeAllLogRowMoved(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.SlidingLog, Limit: 10, Period: time.Second}
	s, clock, take := logStore(t, t0, p)
	ctx := context.Background()
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
			if tb := s.shards[i].table(c.pt); tb != nil && tb.len() > 0 {
				_, log := tb.logRow(0).state()
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

// TestLogSpillMakeRoom: makeRoom drops the entries before low (those the
// model has dropped) only when the array is full, keeps the model's state,
// and grows the array when that leaves too little room.
func TestLogSpillMakeRoom(t *testing.T) {
	mk := func(low int, ats ...int64) *logSpill {
		l := make([]model.LogEntry, len(ats))
		for i, at := range ats {
			l[i] = model.LogEntry{At: at, Total: uint64(100 + i + 1)}
		}
		return &logSpill{count: 100, log: l, low: low}
	}
	same := func(a, b *logSpill) bool {
		ac, al := a.view()
		bc, bl := b.view()
		return ac == bc && slices.Equal(al, bl)
	}
	// Room left: unchanged.
	sp := mk(1, 1, 2)
	sp.log = append(make([]model.LogEntry, 0, 4), sp.log...)
	arr := &sp.log[0]
	sp.makeRoom(1)
	if sp.low != 1 || len(sp.log) != 2 || &sp.log[0] != arr {
		t.Errorf("with room: %+v", sp)
	}
	// Full with four dropped entries: they go, in place.
	sp, want := mk(4, 1, 2, 3, 4, 8, 9, 10, 11), mk(4, 1, 2, 3, 4, 8, 9, 10, 11)
	arr = &sp.log[0]
	sp.makeRoom(1)
	if sp.low != 0 || len(sp.log) != 4 || sp.count != 104 || &sp.log[0] != arr || cap(sp.log) != 8 || !same(sp, want) {
		t.Errorf("full, 4 dropped: %+v", sp)
	}
	// Dropping leaves too little room for three more: grows.
	sp = mk(4, 1, 2, 3, 4, 8, 9, 10, 11)
	if sp.makeRoom(3); cap(sp.log)-len(sp.log) < 3 || !same(sp, want) {
		t.Errorf("full, 4 dropped, need 3: %+v (cap %d)", sp, cap(sp.log))
	}
	// Full with nothing dropped: grows.
	sp, want = mk(0, 6, 7, 8, 9), mk(0, 6, 7, 8, 9)
	if sp.makeRoom(1); cap(sp.log) < 8 || !same(sp, want) {
		t.Errorf("full, none dropped: %+v (cap %d)", sp, cap(sp.log))
	}
	// Full with four dropped, but shared with a hot key's readers: the log
	// moves to a new array, and the shared one is left as it was.
	sp, want = mk(4, 1, 2, 3, 4, 8, 9, 10, 11), mk(4, 1, 2, 3, 4, 8, 9, 10, 11)
	sp.shared = true
	old := sp.log
	sp.makeRoom(1)
	if sp.low != 0 || len(sp.log) != 4 || sp.count != 104 || &sp.log[0] == &old[0] || sp.shared || !same(sp, want) {
		t.Errorf("full, 4 dropped, shared: %+v", sp)
	}
	if !slices.Equal(old, want.log) {
		t.Errorf("the shared array was written: %+v, want %+v", old, want.log)
	}
}

// TestSlidingLogMatchesModel: sliding-log Take and TakeAll on a few keys
// of one shard decide exactly as the model does on the states it returns,
// whatever the keys' logs hold (inline, spilled, entries that have left
// the window), on a clock that sometimes steps back, under a named policy
// whose Limit and Period change between requests (a reconfiguration),
// and with the expired keys dropped when the model's states expire.
func TestSlidingLogMatchesModel(t *testing.T) {
	variants := []sluice.Policy{
		{Name: "n", Algorithm: sluice.SlidingLog, Limit: 6, Period: time.Second},
		{Name: "n", Algorithm: sluice.SlidingLog, Limit: 3, Period: time.Second},
		{Name: "n", Algorithm: sluice.SlidingLog, Limit: 6, Period: 3 * time.Second},
		{Name: "n", Algorithm: sluice.SlidingLog, Limit: 9, Period: 300 * time.Millisecond},
	}
	models := make([]*model.Model, len(variants))
	for i, p := range variants {
		m, err := model.New(p)
		if err != nil {
			t.Fatal(err)
		}
		models[i] = m
	}
	ctx := context.Background()
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 14))
		clock := sluicetest.NewClock(t0.Add(time.Hour))
		s := New(WithClock(clock), WithSweepInterval(0), withShards(1))
		nkeys := 2 + rng.IntN(6)
		// How many variants the seed uses: one (no reconfiguration) up to
		// all of them.
		nvar := 1 + int(seed%uint64(len(variants)))
		stepBack := seed%3 == 0
		oracle := map[string]model.State{}
		cur := 0      // the variant the store compiled last
		longest := -1 // the variant of the longest period used so far
		use := func(v int) {
			cur = v
			if longest < 0 || variants[v].Period > variants[longest].Period {
				longest = v
			}
		}
		now := clock.Now().UnixNano()
		// settle drops key from the oracle when its state has expired
		// under v, as the store drops a key it touched, unless it still
		// counts under the longest period used (memstore's outlives).
		settle := func(key string, v int) {
			st, ok := oracle[key]
			if !ok || models[v].ExpiresAt(st) > now {
				return
			}
			if variants[longest].Period > variants[v].Period && models[longest].ExpiresAt(st) > now {
				return
			}
			delete(oracle, key)
		}
		for step := range 2000 {
			switch r := rng.IntN(10); {
			case r == 0:
				now += rng.Int64N(int64(4 * time.Second))
			case r < 4:
				now += rng.Int64N(int64(300 * time.Millisecond))
			case r == 4 && stepBack:
				now -= rng.Int64N(int64(time.Second))
			}
			clock.Set(time.Unix(0, now))
			if step%97 == 0 {
				// The store sweeps under the policy's current parameters
				// (those of the variant compiled last), or the longest
				// period used if longer.
				s.Sweep()
				sweepAs := cur
				if longest >= 0 && variants[longest].Period > variants[cur].Period {
					sweepAs = longest
				}
				for k, st := range oracle {
					if models[sweepAs].ExpiresAt(st) <= now {
						delete(oracle, k)
					}
				}
				if len(oracle) == 0 {
					// The sweep also collects a policy with no key left:
					// its longest period is forgotten.
					longest = -1
				}
				if s.Len() != len(oracle) {
					t.Fatalf("seed %d step %d: Len %d after Sweep, want %d", seed, step, s.Len(), len(oracle))
				}
			}
			key := func() string { return fmt.Sprint("k", rng.IntN(nkeys)) }
			if rng.IntN(3) > 0 {
				v := rng.IntN(nvar)
				use(v)
				k := key()
				cost := rng.Int64N(variants[v].Limit + 2)
				var want sluice.Decision
				oracle[k], want = models[v].Take(cloneState(oracle[k]), now, cost)
				settle(k, v)
				got, err := s.Take(ctx, variants[v], k, cost)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("seed %d step %d: take %v %s %d: got %+v, want %+v", seed, step, variants[v], k, cost, got, want)
				}
				continue
			}
			reqs := make([]sluice.Request, 1+rng.IntN(4))
			vs := make([]int, len(reqs))
			for i := range reqs {
				vs[i] = rng.IntN(nvar)
				use(vs[i])
				reqs[i] = sluice.Request{Policy: variants[vs[i]], Key: key(), Cost: rng.Int64N(variants[vs[i]].Limit + 1)}
			}
			want, all := modelBatch(oracle, reqs, now,
				func(i int) string { return reqs[i].Key },
				func(i int) *model.Model { return models[vs[i]] })
			if all {
				// The store drops a key of the batch whose state has
				// expired under the last policy that evaluated it; a
				// refused batch writes nothing and drops nothing.
				last := map[string]int{}
				for i, r := range reqs {
					last[r.Key] = vs[i]
				}
				for k, v := range last {
					settle(k, v)
				}
			}
			got := make([]sluice.Decision, len(reqs))
			if err := s.TakeAll(ctx, reqs, got); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("seed %d step %d: batch %v: request %d: got %+v, want %+v", seed, step, reqs, i, got[i], want[i])
				}
			}
		}
		checkTables(t, s)
		s.Close()
	}
}

// TestTakeAllInlineLogMoved: y, in the table's last row, has two
// inline entries that have both left the window; a batch peeks x (expired,
// row 0) and takes 1 on y. logRoom prunes y's log to an empty slice of the
// row's own array (cap 2, no reallocation), so the model appends y's new
// entry into the row. Dropping x moves y's row to row 0 and zeroes the old
// last row, which the batch's w.base still points at.
func TestTakeAllInlineLogMoved(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.SlidingLog, Limit: 10, Period: time.Second}
	s, clock, take := logStore(t, t0.Add(time.Hour), p)
	ctx := context.Background()
	m, err := model.New(p)
	if err != nil {
		t.Fatal(err)
	}
	take("x", 1) // row 0
	take("y", 4) // row 1, the last
	take("y", 4) // y: two inline entries
	clock.Advance(2 * time.Second)
	reqs := []sluice.Request{
		{Policy: p, Key: "x", Cost: 0},
		{Policy: p, Key: "y", Cost: 3},
	}
	out := make([]sluice.Decision, len(reqs))
	if err := s.TakeAll(ctx, reqs, out); err != nil || !out[1].Allowed {
		t.Fatal(out, err)
	}
	// The model: y holds one entry of 3 units, now.
	now := clock.Now().UnixNano()
	_, want := m.Take(model.State{Log: []model.LogEntry{{At: now, Total: 3}}}, now, 0)
	if got := take("y", 0); got != want {
		t.Errorf("y after the batch: %+v, want %+v (keys held %d)", got, want, s.Len())
	}
}

// logTrace runs steps (instant since t0+1h, cost, new period or 0)
// through a store and the model, comparing every decision.
func logTrace(t *testing.T, steps [][3]int64) {
	t.Helper()
	base := t0.Add(time.Hour)
	clock := sluicetest.NewClock(base)
	s := New(WithClock(clock), WithSweepInterval(0), withShards(1))
	defer s.Close()
	ctx := context.Background()
	p := sluice.Policy{Name: "n", Algorithm: sluice.SlidingLog, Limit: 10, Period: time.Second}
	var st model.State
	for i, step := range steps {
		if step[2] != 0 {
			p.Period = time.Duration(step[2])
		}
		m, err := model.New(p)
		if err != nil {
			t.Fatal(err)
		}
		now := base.Add(time.Duration(step[0]))
		clock.Set(now)
		var want sluice.Decision
		st, want = m.Take(st, now.UnixNano(), step[1])
		got, err := s.Take(ctx, p, "k", step[1])
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("step %d (t=%v cost %d period %v): got %+v, want %+v", i, time.Duration(step[0]), step[1], p.Period, got, want)
		}
	}
}

// TestSlidingLogTraces: traces where a row that kept entries the model has
// dropped (or dropped entries the model keeps) decides otherwise.
func TestSlidingLogTraces(t *testing.T) {
	t.Run("rejection then clock back", func(t *testing.T) {
		logTrace(t, [][3]int64{
			{0, 6, 0},
			{500 * ms, 3, 0},
			{1200 * ms, 8, 0}, // rejected: the model keeps the entry at 0
			{600 * ms, 2, 0},  // the clock stepped back: the model sees 9 live
		})
	})
	t.Run("admission then clock back", func(t *testing.T) {
		logTrace(t, [][3]int64{
			{0, 6, 0},
			{1200 * ms, 1, 0}, // the model drops the entry at 0
			{500 * ms, 5, 0},  // the clock stepped back: the model sees 1 live
		})
	})
	t.Run("period increased", func(t *testing.T) {
		logTrace(t, [][3]int64{
			{0, 6, 0},
			{1500 * ms, 1, 0},
			{2000 * ms, 5, int64(10 * time.Second)},
		})
	})
	t.Run("spilled, admission then clock back", func(t *testing.T) {
		logTrace(t, [][3]int64{
			{0, 2, 0}, {100 * ms, 2, 0}, {200 * ms, 2, 0}, // three entries: spilled
			{1150 * ms, 1, 0}, // the model drops the entries at 0 and 100ms
			{300 * ms, 7, 0},  // the clock stepped back: the model sees 3 live
		})
	})
}

// TestLogRejectionWritesNothing: a rejected request leaves the row as it
// was (logrow.go: "Nothing is written unless the log changes").
func TestLogRejectionWritesNothing(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.SlidingLog, Limit: 10, Period: time.Second}
	s, clock, take := logStore(t, t0.Add(time.Hour), p)
	take("k", 6)
	clock.Advance(500 * time.Millisecond)
	take("k", 3)
	clock.Advance(700 * time.Millisecond) // the entry of 6 has left the window
	c, err := s.compile(p)
	if err != nil {
		t.Fatal(err)
	}
	tb := s.shards[0].table(c.pt)
	before := *tb.logRow(0)
	if d := take("k", 8); d.Allowed {
		t.Fatalf("8 more on 3 of 10 admitted: %+v", d)
	}
	if after := *tb.logRow(0); after != before {
		t.Errorf("a rejection wrote the row: %+v, was %+v", after, before)
	}
}

// TestTakeAllPeekLongerPeriod: a batch peeks k under a named policy
// with a 10s period, then takes under the same name with a 1s period.
// TakeAll's logRoom prunes k's log with the takes' period (o.period counts
// only cost > 0) before the peek is evaluated.
func TestTakeAllPeekLongerPeriod(t *testing.T) {
	q := sluice.Policy{Name: "n", Algorithm: sluice.SlidingLog, Limit: 10, Period: 10 * time.Second}
	p := q
	p.Period = time.Second
	s, clock, take := logStore(t, t0.Add(time.Hour), q)
	ctx := context.Background()
	mq, err := model.New(q)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := mq.Take(model.State{}, clock.Now().UnixNano(), 4)
	take("k", 4)
	clock.Advance(2 * time.Second)
	_, want := mq.Take(st, clock.Now().UnixNano(), 0)
	out := make([]sluice.Decision, 2)
	if err := s.TakeAll(ctx, []sluice.Request{{Policy: q, Key: "k", Cost: 0}, {Policy: p, Key: "k", Cost: 1}}, out); err != nil {
		t.Fatal(err)
	}
	if out[0] != want {
		t.Errorf("peek under the 10s period: %+v, want %+v", out[0], want)
	}
}

const ms = int64(time.Millisecond)
