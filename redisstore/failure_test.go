// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestBreaker: a Redis that stops answering costs a few timeouts, then
// calls fail at once with ErrUnavailable; once Redis answers again the store
// uses it within a second; every failure is counted.
func TestBreaker(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	c := newClient(t, addr)
	admin := newClient(t, addr)
	s := newStore(t, c, WithTimeout(20*time.Millisecond), WithBreaker(3, 100*time.Millisecond))
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Second}
	ctx := t.Context()
	// Warm up: the first call loads the script, which can take longer than
	// the 20ms timeout on a slow machine (under -race, say).
	for warm := time.Now(); ; {
		if _, err := s.Take(ctx, p, "k", 1); err == nil {
			break
		}
		if time.Since(warm) > 10*time.Second {
			t.Fatalf("no successful call in 10s; stats %+v", s.Stats())
		}
		time.Sleep(10 * time.Millisecond) // polling a warming store
	}

	const pause = 1500 * time.Millisecond
	paused := time.Now()
	if err := admin.Do(ctx, admin.B().ClientPause().Timeout(pause.Milliseconds()).All().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Take(ctx, p, "k", 1); err == nil || errors.Is(err, ErrUnavailable) {
			t.Fatalf("call %d to a paused Redis: error %v, want a timeout", i, err)
		}
	}
	// With the breaker open a call never reaches Redis (no call is
	// counted, so none waits for a timeout): it fails at once.
	// (A probe, one per cooldown, may reach the paused Redis and time out
	// if the machine is slow enough for a cooldown to pass in the loop.)
	before := s.Stats()
	probes := 0
	for range 100 {
		_, err := s.Take(ctx, p, "k", 1)
		switch {
		case err == nil:
			t.Fatal("a call to a paused Redis succeeded")
		case !errors.Is(err, ErrUnavailable):
			probes++
		}
	}
	after := s.Stats()
	if calls := int(after.Calls - before.Calls); calls != probes || probes > 2 || after.ShortCircuited-before.ShortCircuited != uint64(100-probes) {
		t.Fatalf("100 calls with the breaker open: %d reached Redis (%d probes), %d short-circuited",
			calls, probes, after.ShortCircuited-before.ShortCircuited)
	}
	st := s.Stats()
	if st.Errors < 3 || st.Timeouts < 3 || st.ShortCircuited < 100 || st.BreakerOpens < 1 {
		t.Fatalf("stats %+v", st)
	}
	// Poll until the store answers again.
	var recovered time.Time
	for {
		if _, err := s.Take(ctx, p, "k", 1); err == nil {
			recovered = time.Now()
			break
		}
		if time.Since(paused) > pause+5*time.Second {
			t.Fatalf("no recovery %v after the pause ended; stats %+v", time.Since(paused)-pause, s.Stats())
		}
		time.Sleep(5 * time.Millisecond) // polling a recovering server
	}
	// How soon after the pause it recovers is the breaker's cooldown
	// (TestBreakerCooldown, on a fake clock); here, only that it does.
	t.Logf("recovered %v after Redis answered again", recovered.Sub(paused)-pause)
	if recovered.Sub(paused) < pause {
		t.Fatalf("a call succeeded %v into a %v pause", recovered.Sub(paused), pause)
	}
}

// TestUnavailable: a store whose Redis has gone away fails fast
// with errors, never panics, and the Limiter applies its failure mode.
func TestUnavailable(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	c := newClient(t, addr)
	s := newStore(t, c, WithBreaker(2, time.Hour))
	p := sluice.Policy{Algorithm: sluice.SlidingLog, Limit: 3, Period: time.Second}
	take(t, s, p, "k", 1)
	if err := c.Do(t.Context(), c.B().Shutdown().Nosave().Build()).Error(); err == nil {
		t.Fatal("SHUTDOWN returned no error (the connection should close)")
	}
	open, err := sluice.NewLimiter(s, p, sluice.WithFailureMode(sluice.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	closed, err := sluice.NewLimiter(s, p, sluice.WithFailureMode(sluice.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if d, err := open.Allow(t.Context(), "k"); err == nil || !d.Allowed {
			t.Fatalf("fail-open limiter on a dead Redis: %+v %v", d, err)
		}
		if d, err := closed.Allow(t.Context(), "k"); err == nil || d.Allowed {
			t.Fatalf("fail-closed limiter on a dead Redis: %+v %v", d, err)
		}
	}
	if st := s.Stats(); st.Errors < 2 || st.ShortCircuited < 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRedisRestart: Redis killed under load and started again. While it is
// down a fail-closed Limiter rejects with an error and nothing panics; once
// it answers again (empty, without the script) decisions resume within a
// second.
func TestRedisRestart(t *testing.T) {
	srv := sluicetest.StartRedisServer(t)
	c := newClient(t, srv.Addr)
	s := newStore(t, c, WithTimeout(200*time.Millisecond), WithBreaker(3, 100*time.Millisecond))
	p := sluice.Policy{Algorithm: sluice.SlidingWindow, Limit: 1_000_000, Period: time.Second}
	lim, err := sluice.NewLimiter(s, p, sluice.WithFailureMode(sluice.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		lastOK   time.Time
		failures int
		wrong    error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d, err := lim.Allow(t.Context(), fmt.Sprint("k", g, "-", i%100))
				mu.Lock()
				switch {
				case err == nil && d.Allowed:
					lastOK = time.Now()
				case err != nil && !d.Allowed:
					failures++
				default:
					wrong = fmt.Errorf("decision %+v with error %v", d, err)
				}
				mu.Unlock()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; stats %+v", what, s.Stats())
			}
			time.Sleep(5 * time.Millisecond) // polling the load goroutines
		}
	}
	state := func() (time.Time, int, error) {
		mu.Lock()
		defer mu.Unlock()
		return lastOK, failures, wrong
	}
	waitFor("decisions before the kill", func() bool { ok, _, _ := state(); return !ok.IsZero() })
	srv.Kill()
	killed := time.Now()
	waitFor("failures after the kill", func() bool { _, f, _ := state(); return f > 0 })
	srv.Restart()
	restarted := time.Now()
	waitFor("decisions after the restart", func() bool { ok, _, _ := state(); return ok.After(restarted) })
	ok, f, w := state()
	if w != nil {
		t.Fatal(w)
	}
	st := s.Stats()
	if st.Errors == 0 || st.BreakerOpens == 0 {
		t.Fatalf("stats after an outage: %+v", st)
	}
	t.Logf("down %v, %d failed decisions, recovered %v after the restart; %+v", restarted.Sub(killed), f, ok.Sub(restarted), st)
}

// TestCallerDeadlineIsNoFailure: calls that run out of their caller's
// deadline (less the margin) on a Redis that does not answer are not Redis
// failures: they are counted apart, do not open the breaker, and the next
// caller without a hurry is answered by Redis. (When a call ends is not
// asserted here, since a loaded host's timers run late; TestBeginDeadline
// checks the deadline the call is made with.)
func TestCallerDeadlineIsNoFailure(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	c := newClient(t, addr)
	admin := newClient(t, addr)
	s := newStore(t, c, WithBreaker(2, time.Hour)) // default timeout and margin
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Second}
	take(t, s, p, "k", 1)
	const pause = 800 * time.Millisecond
	if err := admin.Do(t.Context(), admin.B().ClientPause().Timeout(pause.Milliseconds()).All().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err := s.Take(ctx, p, "k", 1)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d with a 100ms deadline to a paused Redis: %v, want context.DeadlineExceeded", i, err)
		}
	}
	st := s.Stats()
	if st.CallerTimeouts != 5 || st.Errors != 0 || st.BreakerOpens != 0 {
		t.Fatalf("stats %+v: want 5 caller timeouts, no error, the breaker closed", st)
	}
	// No hurry: this call waits out the pause and Redis answers it.
	if _, err := s.Take(t.Context(), p, "k", 1); err != nil {
		t.Fatalf("a call without a deadline after the pause: %v", err)
	}
}

// TestBreakerEpisodes: calls in flight together that time out together (a
// stall) count as one failure toward the breaker; a failure of a call begun
// after it counts again.
func TestBreakerEpisodes(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	c := newClient(t, addr)
	admin := newClient(t, addr)
	// A timeout long next to how far apart 10 goroutines start, inside a
	// pause long enough for two timeouts in a row.
	s := newStore(t, c, WithTimeout(time.Second), WithBreaker(2, time.Hour))
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Second}
	take(t, s, p, "k", 1)
	if err := admin.Do(t.Context(), admin.B().ClientPause().Timeout(2800).All().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := s.Take(t.Context(), p, "k", 1); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a call to a paused Redis: %v, want a timeout", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	st := s.Stats()
	if st.Timeouts != 10 || st.BreakerOpens != 0 || st.BreakerOpen {
		t.Fatalf("10 overlapping timeouts: %+v; want the breaker still closed (one episode)", st)
	}
	if _, err := s.Take(t.Context(), p, "k", 1); err == nil {
		t.Fatal("a call to a paused Redis succeeded")
	}
	if st := s.Stats(); st.BreakerOpens != 1 || !st.BreakerOpen {
		t.Fatalf("after a second episode: %+v; want the breaker open", st)
	}
}

// TestBreakerCooldown drives the breaker on a fake clock: it opens after
// threshold failed episodes, refuses every call for the cooldown, then lets
// exactly one probe through; a failed probe keeps it open for another
// cooldown (not another opening), a successful one closes it. So a Redis that answers again is
// used at most one cooldown after it does.
func TestBreakerCooldown(t *testing.T) {
	var now int64
	b := &breaker{threshold: 3, cooldown: 200 * time.Millisecond, clock: func() int64 { return now }}
	fail := func() bool {
		t.Helper()
		if !b.allow() {
			t.Fatalf("at %v: a call refused while the breaker should let it through", time.Duration(now))
		}
		start := now
		now += int64(time.Millisecond)
		return b.failure(start)
	}
	for i := range 2 {
		if fail() {
			t.Fatalf("failure %d of 3 opened the breaker", i+1)
		}
	}
	if !fail() {
		t.Fatal("the third failed episode did not open the breaker")
	}
	opened := now
	for _, d := range []time.Duration{0, time.Millisecond, 199 * time.Millisecond} {
		now = opened + int64(d)
		if b.allow() {
			t.Fatalf("%v into a 200ms cooldown: a call was let through", d)
		}
	}
	now = opened + int64(200*time.Millisecond)
	if !b.allow() {
		t.Fatal("no probe at the end of the cooldown")
	}
	if b.allow() {
		t.Fatal("a second call let through while the probe is out")
	}
	if b.failure(now) {
		t.Fatal("a failed probe counted as another opening (it keeps the breaker open)")
	}
	reopened := now
	now = reopened + int64(199*time.Millisecond)
	if b.allow() {
		t.Fatal("a call let through 199ms into the second cooldown")
	}
	now = reopened + int64(200*time.Millisecond)
	if !b.allow() {
		t.Fatal("no probe at the end of the second cooldown")
	}
	b.success()
	for i := range 5 {
		if !b.allow() {
			t.Fatalf("call %d after a successful probe refused", i)
		}
	}
}

// TestBreakerOpensOncePerOutage: Redis dies once and stays dead for two
// seconds while calls keep coming. Stats.BreakerOpens (serve's
// sluice_redis_breaker_opens_total, "Times the circuit breaker opened")
// counts one opening: the probes that fail every cooldown keep the breaker
// open and are not openings, so the counter counts outages and does not
// read as a breaker flapping five times a second.
func TestBreakerOpensOncePerOutage(t *testing.T) {
	srv := sluicetest.StartRedisServer(t)
	s, err := Open("redis://" + srv.Addr) // serve's defaults
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	p := sluice.Policy{Name: "p", Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Second}
	if _, err := s.Take(ctx, p, "k", 1); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		_, _ = s.Take(ctx, p, "k", 1)
	}
	if st := s.Stats(); !st.BreakerOpen || st.BreakerOpens != 1 {
		t.Errorf("one outage, breaker open throughout: BreakerOpen %v, BreakerOpens %d, want true and 1; %+v", st.BreakerOpen, st.BreakerOpens, st)
	}
}

// TestBreakerRecovered drives the breaker on a fake clock through two
// outages: failed probes keep it open without counting as openings, and
// each closing reports, once, how long Redis had been failing: from the
// first of the failures in a row that opened it.
func TestBreakerRecovered(t *testing.T) {
	var now int64
	b := &breaker{threshold: 3, cooldown: 200 * time.Millisecond, clock: func() int64 { return now }}
	step := func(d time.Duration) { now += int64(d) }
	for outage := range 2 {
		first := now
		opened := 0
		for range 3 { // the failures in a row that open it
			if !b.allow() {
				t.Fatalf("outage %d: a call refused before the breaker opened", outage)
			}
			start := now
			step(10 * time.Millisecond)
			if b.failure(start) {
				opened++
			}
		}
		for range 5 { // failed probes, one per cooldown
			step(200 * time.Millisecond)
			if !b.allow() {
				t.Fatalf("outage %d: no probe after a cooldown", outage)
			}
			start := now
			step(time.Millisecond)
			if b.failure(start) {
				opened++
			}
		}
		if opened != 1 {
			t.Fatalf("outage %d: failure reported %d openings, want 1", outage, opened)
		}
		step(200 * time.Millisecond)
		if !b.allow() {
			t.Fatalf("outage %d: no probe after a cooldown", outage)
		}
		step(time.Millisecond)
		failing, closed := b.success()
		if want := time.Duration(now - first - int64(10*time.Millisecond)); !closed || failing != want {
			t.Fatalf("outage %d: the probe that succeeded: closed %v, failing %v; want true, %v", outage, closed, failing, want)
		}
		if _, closed := b.success(); closed {
			t.Fatalf("outage %d: a second success reported the breaker closed again", outage)
		}
		step(time.Second)
	}
}

// TestRecovered: WithRecovered's function is called once when Redis comes
// back after an outage that opened the breaker, with how long it had been
// failing; not while Redis answers, and not while it is down.
func TestRecovered(t *testing.T) {
	srv := sluicetest.StartRedisServer(t)
	var mu sync.Mutex
	var got []time.Duration
	s, err := Open("redis://"+srv.Addr, WithRecovered(func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	p := sluice.Policy{Name: "p", Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Second}
	calls := func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	for range 10 {
		if _, err := s.Take(ctx, p, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill()
	killed := time.Now()
	for !s.Stats().BreakerOpen {
		if _, err := s.Take(ctx, p, "k", 1); err == nil {
			t.Fatal("a call to a dead Redis succeeded")
		}
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("the breaker did not open in 10 s; %+v", s.Stats())
		}
	}
	time.Sleep(500 * time.Millisecond) // an outage of a few cooldowns
	if c := calls(); len(c) != 0 {
		t.Fatalf("Redis down: recovered called %v", c)
	}
	srv.Restart()
	restarted := time.Now()
	for {
		if _, err := s.Take(ctx, p, "k", 1); err == nil {
			break
		}
		if time.Since(restarted) > 10*time.Second {
			t.Fatalf("no call succeeded 10 s after the restart; %+v", s.Stats())
		}
		time.Sleep(10 * time.Millisecond) // polling the breaker's probe
	}
	back := time.Now()
	for range 10 {
		if _, err := s.Take(ctx, p, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	c := calls()
	if len(c) != 1 {
		t.Fatalf("one outage: recovered called %d times (%v), want once", len(c), c)
	}
	if outage := back.Sub(killed); c[0] <= 0 || c[0] > outage {
		t.Errorf("recovered(%v) after an outage of at most %v: want the time it failed, within it", c[0], outage)
	}
	t.Logf("recovered(%v); down %v", c[0], back.Sub(killed))
}
