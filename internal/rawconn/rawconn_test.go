// SPDX-License-Identifier: Apache-2.0

package rawconn_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"testing"

	"golang.org/x/net/nettest"

	"github.com/sluicehq/sluice/internal/rawconn"
)

// tcpPair returns the two ends of a loopback TCP connection, each wrapped.
func tcpPair(t testing.TB) (c1, c2 net.Conn, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, err
	}
	l = rawconn.Listen(l)
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	d, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return nil, nil, nil, err
	}
	c1, c2 = rawconn.Wrap(d), <-accepted
	if c2 == nil {
		d.Close()
		return nil, nil, nil, errors.New("accept failed")
	}
	return c1, c2, func() { c1.Close(); c2.Close() }, nil
}

// TestConn runs x/net's conformance tests of net.Conn (reads, writes,
// deadlines, Close, concurrent use) on two wrapped ends.
func TestConn(t *testing.T) {
	nettest.TestConn(t, func() (net.Conn, net.Conn, func(), error) { return tcpPair(t) })
}

// TestLargeWrite writes more than the socket buffers hold, so that writes
// are partial and wait for the reader, and checks every byte arrives.
func TestLargeWrite(t *testing.T) {
	c1, c2, stop, err := tcpPair(t)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	data := make([]byte, 32<<20)
	rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		n, err := c1.Write(data)
		if err == nil && n != len(data) {
			err = io.ErrShortWrite
		}
		c1.Close()
		errc <- err
	}()
	got, err := io.ReadAll(io.LimitReader(c2, int64(len(data)+1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(data))
	}
}

// TestErrors checks that a read of a closed peer is io.EOF, and that reads
// and writes after Close, empty ones too, fail with net.ErrClosed as a
// *net.OpError.
func TestErrors(t *testing.T) {
	c1, c2, stop, err := tcpPair(t)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c1.Close()
	if n, err := c2.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("read of a closed peer: %d, %v; want 0, io.EOF", n, err)
	}
	c2.Close()
	for _, size := range []int{10, 0} {
		for _, op := range []string{"read", "write"} {
			var err error
			if op == "read" {
				_, err = c2.Read(make([]byte, size))
			} else {
				_, err = c2.Write(make([]byte, size))
			}
			var oe *net.OpError
			if !errors.Is(err, net.ErrClosed) || !errors.As(err, &oe) || oe.Op != op {
				t.Fatalf("%s of %d bytes after Close: %v; want a *net.OpError %q of net.ErrClosed", op, size, err, op)
			}
		}
	}
}
