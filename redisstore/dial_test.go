// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"
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
