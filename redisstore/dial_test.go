// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestDialPlain: by default a connection is the standard library's; with a
// wrapper (WithConnWrapper) it is what the wrapper returns.
func TestDialPlain(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := dial(context.Background(), l.Addr().String(), &net.Dialer{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, plain := c.(*net.TCPConn); !plain {
		t.Fatalf("dial gave a %T, want a *net.TCPConn", c)
	}
	type wrapped struct{ net.Conn }
	w, err := dial(context.Background(), l.Addr().String(), &net.Dialer{}, nil, func(c net.Conn) net.Conn { return wrapped{c} })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, ok := w.(wrapped); !ok {
		t.Fatalf("dial with a wrapper gave a %T", w)
	}
}

// TestDialHandshakeBounded: against a server that accepts and never
// answers, the TLS handshake ends with the dialer's timeout, as with
// tls.Dialer, instead of waiting for ever.
func TestDialHandshakeBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // silent until the test ends
		}
	}()
	for _, d := range []*net.Dialer{
		{Timeout: 50 * time.Millisecond},
		{Deadline: time.Now().Add(50 * time.Millisecond)},
	} {
		c, err := dial(context.Background(), l.Addr().String(), d, &tls.Config{}, nil)
		if err == nil {
			c.Close()
			t.Fatalf("dialer %+v: the handshake with a silent server succeeded", d)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dialer %+v: %v, want context.DeadlineExceeded", d, err)
		}
	}
}

// TestDialErrorsAfterRedisDies: Stats.DialErrors (serve's
// sluice_redis_dial_errors_total, "Failed attempts to connect to Redis")
// counts the reconnections that fail after a Redis that answered at the
// start has died, not only a first connection that failed: it is what tells
// a dead Redis from a slow one.
func TestDialErrorsAfterRedisDies(t *testing.T) {
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
	if st := s.Stats(); st.DialErrors != 0 {
		t.Fatalf("Redis up: DialErrors %d, want 0", st.DialErrors)
	}
	srv.Kill()
	// Two seconds of calls: past the breaker's threshold, a probe every
	// cooldown (200 ms), each of which must connect to a port that refuses.
	var failed int
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := s.Take(ctx, p, "k", 1); err != nil {
			failed++
		}
	}
	st := s.Stats()
	if failed == 0 || st.Errors == 0 {
		t.Fatalf("Redis killed, yet %d calls failed; %+v", failed, st)
	}
	if st.DialErrors == 0 {
		t.Errorf("Redis refused every connection for 2 s (%d calls failed, %d Redis errors), and DialErrors is 0", failed, st.Errors)
	}
	t.Logf("%d calls failed; %+v", failed, st)
}
