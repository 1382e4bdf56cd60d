// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// stallProxy forwards TCP between its clients and the server at addr
// until stall is called; from then on it forwards nothing more, keeping
// the connections open: a Redis that has stopped answering (a stalled
// host, a kill -STOP). Everything closes when t ends.
func stallProxy(t *testing.T, addr string) (proxy string, stall func()) {
	proxy, stall, _ = gateProxy(t, addr)
	return proxy, stall
}

// gateProxy is stallProxy whose stall can end: release forwards what was
// held, in order, and then everything again, until the next stall.
func gateProxy(t *testing.T, addr string) (proxy string, stall, release func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	open := make(chan struct{}) // closed while forwarding
	close(open)
	quit := make(chan struct{})
	var conns []net.Conn
	t.Cleanup(func() {
		close(quit)
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	gate := func() chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		return open
	}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case <-gate(): // held until released
				case <-quit:
					return
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				if err != io.EOF {
					dst.Close()
				}
				return
			}
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, r)
			mu.Unlock()
			go pipe(r, c)
			go pipe(c, r)
		}
	}()
	stall = func() {
		mu.Lock()
		defer mu.Unlock()
		open = make(chan struct{})
	}
	release = func() {
		mu.Lock()
		defer mu.Unlock()
		close(open)
	}
	return l.Addr().String(), stall, release
}

// cancelInFlight runs call with a context that is cancelled once the
// store has begun a call to Redis for it (Stats.Calls grew), and returns
// call's error.
func cancelInFlight(s *Store, call func(ctx context.Context) error) error {
	calls := s.Stats().Calls
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- call(ctx) }()
	for s.Stats().Calls == calls {
		runtime.Gosched()
	}
	cancel()
	return <-errc
}

// TestCancelWhileRedisStalls: a caller whose context is cancelled while
// it waits for Redis (which has stopped answering) stops waiting at once,
// with context.Canceled: a Take waiting in a batch behind a call in
// flight, a Reset and a Ping. Before the fix each waited for the store's
// timeout (DefaultTimeout, 3 s) and returned context.DeadlineExceeded, so
// the error tells the two apart without timing anything. The
// cancellations are the callers' own: not Redis errors, and not caller
// timeouts. (A Take sent alone waits for its call: see the package doc.)
func TestCancelWhileRedisStalls(t *testing.T) {
	proxy, stall := stallProxy(t, sluicetest.StartRedis(t))
	s, err := Open("redis://" + proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	p := sluice.Policy{Name: "cancel", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute}
	if _, err := s.Take(context.Background(), p, "warm", 1); err != nil {
		t.Fatal(err)
	}
	stall()
	// A Take in flight alone, so that the next ones wait in a batch. It
	// ends at its bound, after the test.
	// (Calls counts the call when it begins, before the gathering marks it
	// in flight: wait for the mark, or a Take below could go alone.)
	go func() { _, _ = s.Take(context.Background(), p, "a", 1) }()
	for !flying(s) {
		runtime.Gosched()
	}
	for name, call := range map[string]func(ctx context.Context) error{
		"Take in a batch": func(ctx context.Context) error {
			_, err := s.Take(ctx, p, "b", 1)
			return err
		},
		"Reset": func(ctx context.Context) error { return s.Reset(ctx, p, "a") },
		"Ping":  s.Ping,
	} {
		err := cancelInFlight(s, call)
		if !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s cancelled while Redis stalls: %v, want context.Canceled at once", name, err)
		}
	}
	if st := s.Stats(); st.Errors != 0 || st.CallerTimeouts != 0 {
		t.Errorf("stats %+v: a caller's cancellation counted as a Redis error or a caller timeout", st)
	}
}

// TestCancelWhileConnecting: a call waiting for the store's first
// connection (to a server that accepts and never answers) stops waiting
// when its context is cancelled, with context.Canceled (before the fix it
// waited for its bound and returned context.DeadlineExceeded).
func TestCancelWhileConnecting(t *testing.T) {
	s, err := Open("redis://" + silentServer(t, true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute}
	err = cancelInFlight(s, func(ctx context.Context) error {
		_, err := s.Take(ctx, p, "k", 1)
		return err
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Take cancelled while connecting: %v, want context.Canceled", err)
	}
}

// TestCancelledOverrideBarrier: callers of Override in one domain share
// one barrier call; the one that began it hanging up must not fail the
// others (before the fix, its context.Canceled was every waiter's
// answer). SetOverride and Shares cancelled in flight return at once,
// and their calls' replies, which come after their callers left, are
// dropped. (Before the fix those calls wrote their callers' variables when
// the reply came: a data race the race detector caught when the caller
// did nothing in between, which a test cannot arrange without sleeping;
// the results now come back through await's channel.)
func TestCancelledOverrideBarrier(t *testing.T) {
	proxy, stall, release := gateProxy(t, sluicetest.StartRedis(t))
	s, err := Open("redis://" + proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	bg := context.Background()
	if _, err := s.SetOverride(bg, "dom", "id", "spec", "rec"); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(bg); err != nil {
		t.Fatal(err)
	}
	stall()
	// The first caller begins the domain's barrier (a new store's first
	// Override in it), and hangs up while the call is held.
	first, cancelFirst := context.WithCancel(bg)
	firstErr := make(chan error, 1)
	calls := s.Stats().Calls
	go func() {
		_, _, err := s.Override(first, "dom", "id")
		firstErr <- err
	}()
	for s.Stats().Calls == calls {
		runtime.Gosched()
	}
	type answer struct {
		spec string
		ok   bool
		err  error
	}
	second := make(chan answer, 1)
	go func() {
		spec, ok, err := s.Override(bg, "dom", "id")
		second <- answer{spec, ok, err}
	}()
	for range 1000 { // let the second caller reach the barrier's wait
		runtime.Gosched()
	}
	cancelFirst()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that hung up: %v, want context.Canceled", err)
	}
	// Calls abandoned in flight, whose replies come back after their
	// callers left.
	for name, call := range map[string]func(ctx context.Context) error{
		"SetOverride": func(ctx context.Context) error {
			_, err := s.SetOverride(ctx, "dom", "other", "spec2", "rec2")
			return err
		},
		"Shares": func(ctx context.Context) error {
			_, err := s.Shares(ctx, "div", time.Now())
			return err
		},
	} {
		if err := cancelInFlight(s, call); !errors.Is(err, context.Canceled) {
			t.Errorf("%s cancelled in flight: %v, want context.Canceled", name, err)
		}
	}
	release()
	if a := <-second; a.err != nil || !a.ok || a.spec != "spec" {
		t.Errorf("a caller sharing the barrier, still waiting: %q %v %v; want the override", a.spec, a.ok, a.err)
	}
	if err := s.Ping(bg); err != nil { // the abandoned calls' replies have come
		t.Fatal(err)
	}
}

// flying reports whether s's gathering has a call of singles.lua in flight.
func flying(s *Store) bool {
	g := &s.gathering
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.flying > 0
}
