// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// evalshaCalls returns how many EVALSHA calls Redis has run.
func evalshaCalls(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	info, err := c.Do(t.Context(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls=")
		if ok {
			n, err := strconv.ParseInt(v[:strings.IndexByte(v, ',')], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// waitOpen waits until the store's open batch holds n requests.
func waitOpen(s *Store, n int) {
	for {
		g := &s.gathering
		g.mu.Lock()
		k := 0
		if g.open != nil {
			k = len(g.open.ms)
		}
		g.mu.Unlock()
		if k >= n {
			return
		}
		runtime.Gosched()
	}
}

// waitFlying waits until n calls of singles.lua are in flight.
func waitFlying(s *Store, n int) {
	g := &s.gathering
	g.mu.Lock()
	for g.flying != n {
		g.mu.Unlock()
		runtime.Gosched()
		g.mu.Lock()
	}
	g.mu.Unlock()
}

// inFlightForever connects s and marks a call of singles.lua in flight
// that never lands.
func inFlightForever(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.connection(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.gathering.mu.Lock()
	s.gathering.flying = 1
	s.gathering.mu.Unlock()
}

// TestGatherBatch: Takes that arrive while a call is in flight go together
// in one script call when it lands, and each is decided on its own, in
// order, as memstore decides the same requests one after another: a
// refusal (or a peek, or an impossible cost) in the batch does not stop
// the requests after it, and a state the script cannot read is handed to
// take.lua for that request alone.
func TestGatherBatch(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	t0 := time.Unix(1_700_000_000, 0)
	clock := sluicetest.NewClock(t0)
	s := newStore(t, c, WithClock(clock))
	ms := memstore.New(memstore.WithClock(clock))
	defer ms.Close()
	fixed := sluice.Policy{Name: "f", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Second}
	bucket := sluice.Policy{Name: "b", Algorithm: sluice.GCRA, Limit: 3, Period: time.Second}
	leaky := sluice.Policy{Name: "l", Algorithm: sluice.LeakyBucket, Limit: 3, Period: time.Second}
	odd := sluice.Policy{Name: "f", Algorithm: sluice.FixedWindow, Limit: 2, Period: 1500}
	reqs := []struct {
		p    sluice.Policy
		key  string
		cost int64
	}{
		{fixed, "a", 1}, {fixed, "a", 1}, {fixed, "a", 1}, {fixed, "a", 0}, {fixed, "b", 2},
		{bucket, "c", 1}, {bucket, "c", 5}, {bucket, "c", 2}, {bucket, "c", 1}, {bucket, "c", 0},
		{leaky, "d", 2}, {leaky, "d", 1}, {leaky, "d", 0},
		{fixed, "e", 1}, // e holds a window of 1.5 µs: take.lua decides
	}
	// e's state, written by take.lua under a period of 1.5 µs.
	take(t, s, odd, "e", 1)
	if _, err := ms.Take(t.Context(), odd, "e", 1); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(700 * time.Millisecond))
	want := make([]sluice.Decision, len(reqs))
	for i, r := range reqs {
		var err error
		if want[i], err = ms.Take(t.Context(), r.p, r.key, r.cost); err != nil {
			t.Fatal(err)
		}
	}

	cn, err := s.connection(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s.gathering.delay = time.Hour
	s.gathering.mu.Lock()
	s.gathering.flying = 1 // a call in flight: the Takes wait for it
	s.gathering.mu.Unlock()
	calls := evalshaCalls(t, c)
	got := make([]sluice.Decision, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() { got[i], errs[i] = s.Take(t.Context(), r.p, r.key, r.cost) })
		waitOpen(s, i+1) // in this order
	}
	s.landed(cn)
	wg.Wait()
	for i := range reqs {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if got[i] != want[i] {
			t.Errorf("request %d %+v:\n got  %+v\n want %+v", i, reqs[i], got[i], want[i])
		}
	}
	// One call for the batch, and one of take.lua for e.
	if n := evalshaCalls(t, c) - calls; n != 2 {
		t.Errorf("%d requests made %d script calls, want 2", len(reqs), n)
	}
	waitFlying(s, 0) // the batch's call lands
}

// TestGatherDelay: a request never waits for the call in flight longer
// than the gather delay: here that call never lands, and the Take is
// decided all the same. A Take whose deadline comes while it waits
// returns then, and the batch it was in still goes (and, its context
// having ended, decides nothing).
func TestGatherDelay(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	s := newStore(t, c)
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	inFlightForever(t, s)
	if d := take(t, s, p, "k", 1); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("Take: %+v", d)
	}

	waitFlying(s, 1) // the timer's call has landed
	s.gathering.mu.Lock()
	s.gathering.delay = time.Hour
	s.gathering.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Take(ctx, p, "k", 1); err == nil {
		t.Fatal("a Take waiting past its deadline returned no error")
	}
	if st := s.Stats(); st.CallerTimeouts != 1 || st.Errors != 0 {
		t.Fatalf("stats %+v: want 1 caller timeout, no errors", st)
	}
	cn, _ := s.connection(t.Context())
	s.landed(cn) // the batch with the abandoned request goes
	waitFlying(s, 0)
	// The abandoned request was not decided: its batch's only context had
	// ended, so the call was not made.
	if d := take(t, s, p, "k", 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("second decided Take at a limit of 2: %+v", d)
	}
}

// TestGatherConcurrent: many concurrent Takes on few keys, gathered as they
// come, admit exactly the limit of each key, and no more.
func TestGatherConcurrent(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	clock := sluicetest.NewClock(time.Unix(1_700_000_000, 0))
	s := newStore(t, c, WithClock(clock))
	policies := []sluice.Policy{
		{Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Hour},
		{Algorithm: sluice.TokenBucket, Limit: 70, Period: time.Hour},
	}
	keys := []string{"x", "y", "z"}
	var mu sync.Mutex
	admitted := map[string]int64{}
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := range 20 {
				p := policies[(w+i)%len(policies)]
				k := keys[(w*7+i)%len(keys)]
				d, err := s.Take(t.Context(), p, k, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					admitted[string(p.Algorithm)+k]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, p := range policies {
		for _, k := range keys {
			if n := admitted[string(p.Algorithm)+k]; n != p.Limit {
				t.Errorf("%v key %q: %d admitted, want %d", p.Algorithm, k, n, p.Limit)
			}
		}
	}
}

// TestGatherCancel: a caller that cancels while its request waits in a
// batch leaves with its own error, and the batch's call still decides the
// others, whose results are not errors, nor counted as Redis's (here the
// cancelled caller's context is the batch's latest bound).
func TestGatherCancel(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	s := newStore(t, c, WithDeadlineMargin(0))
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Hour}
	cn, err := s.connection(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s.gathering.delay = time.Hour
	s.gathering.mu.Lock()
	s.gathering.flying = 1
	s.gathering.mu.Unlock()
	// With no margin, a caller's deadline before the store's timeout
	// (DefaultTimeout) bounds the call with the caller's own context; a's
	// is the later.
	ctx, cancel := context.WithTimeout(t.Context(), DefaultTimeout*5/6)
	var cancelled, other error
	var d sluice.Decision
	left := make(chan struct{})
	go func() {
		defer close(left)
		_, cancelled = s.Take(ctx, p, "a", 1)
	}()
	waitOpen(s, 1)
	var wg sync.WaitGroup
	ctxB, cancelB := context.WithTimeout(t.Context(), DefaultTimeout*2/3)
	defer cancelB()
	wg.Go(func() { d, other = s.Take(ctxB, p, "b", 1) })
	waitOpen(s, 2)
	cancel()
	<-left // the first Take leaves on its cancellation
	s.landed(cn)
	wg.Wait()
	if cancelled == nil {
		t.Fatal("the cancelled Take returned no error")
	}
	if other != nil || !d.Allowed {
		t.Fatalf("the other Take in the batch: %+v, %v", d, other)
	}
	if st := s.Stats(); st.Errors != 0 {
		t.Fatalf("stats %+v: a caller's cancellation counted as a Redis error", st)
	}
}

// TestWithGatherDelay: the default is DefaultGatherDelay; a negative
// delay is refused, naming the option; and 0 sends every Take at once in a
// call of its own, never touching the gathering: here the Takes are
// decided while the gathering's lock is held, with a call in flight that
// never lands.
func TestWithGatherDelay(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	if s := newStore(t, c); s.gathering.delay != DefaultGatherDelay {
		t.Fatalf("default gather delay %v, want %v", s.gathering.delay, DefaultGatherDelay)
	}
	if _, err := New(c, WithGatherDelay(-time.Microsecond)); err == nil || !strings.Contains(err.Error(), "gather delay -1µs") {
		t.Fatalf("New with a gather delay of -1µs: %v, want an error naming it", err)
	}
	s := newStore(t, c, WithGatherDelay(0))
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Hour}
	inFlightForever(t, s)
	calls := evalshaCalls(t, c)
	s.gathering.mu.Lock()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if d, err := s.Take(t.Context(), p, "k", 1); err != nil || !d.Allowed {
				t.Errorf("Take: %+v, %v", d, err)
			}
		})
	}
	wg.Wait()
	s.gathering.mu.Unlock()
	if n := evalshaCalls(t, c) - calls; n != 3 {
		t.Fatalf("3 Takes made %d script calls, want 3 (one each)", n)
	}
}
