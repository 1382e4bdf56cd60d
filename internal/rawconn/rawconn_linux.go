// SPDX-License-Identifier: Apache-2.0

package rawconn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// Conn is a *net.TCPConn whose Read and Write are raw system calls. Its
// other methods are the TCPConn's, including ReadFrom and WriteTo (which
// io.Copy uses), which do not take the raw path.
type Conn struct {
	*net.TCPConn
	r, w direction
}

// direction is one direction of a Conn. A call's buffer and result are in
// its fields (under mu), so that the function handed to the poller (fn) is
// made once, in Wrap, and not on every call.
type direction struct {
	mu    sync.Mutex
	buf   []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool             // read or write
	poll  func(func(fd uintptr) bool) error // the RawConn's Read or Write
	name  string                            // "read" or "write"
}

// Wrap returns c as a *Conn if it is a *net.TCPConn, and c itself
// otherwise.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	w := &Conn{TCPConn: tc}
	w.r.fn, w.r.poll, w.r.name = w.r.read, rc.Read, "read"
	w.w.fn, w.w.poll, w.w.name = w.w.write, rc.Write, "write"
	return w
}

// read is one read(2) into buf. It returns false, to have the poller wait,
// when the socket has nothing to read.
func (d *direction) read(fd uintptr) bool {
	for {
		n, e := sysRead(fd, d.buf)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		d.n, d.errno = n, e
		return true
	}
}

// write writes the rest of buf. It returns false, to have the poller wait,
// when the socket's send buffer is full.
func (d *direction) write(fd uintptr) bool {
	for d.n < len(d.buf) {
		n, e := sysWrite(fd, d.buf[d.n:])
		switch e {
		case 0:
			if n > len(d.buf)-d.n {
				// As internal/poll does (go.dev/issue/61060).
				panic(fmt.Sprintf("rawconn: invalid return from write: got %d from a write of %d", n, len(d.buf)-d.n))
			}
			d.n += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			d.errno = e
			return true
		}
	}
	return true
}

// do reads or writes p (not empty), with the poller waiting for the socket
// whenever it is not ready, and returns the bytes moved and the error.
func (d *direction) do(p []byte) (int, error) {
	d.mu.Lock()
	d.buf, d.n, d.errno = p, 0, 0
	err := d.poll(d.fn)
	n, errno := d.n, d.errno
	d.buf = nil
	d.mu.Unlock()
	if err == nil && errno != 0 {
		err = os.NewSyscallError(d.name, errno)
	}
	return n, err
}

// Read reads as net.Conn's Read does.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return c.TCPConn.Read(p) // for its checks of Close and deadlines
	}
	n, err := c.r.do(p)
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes as net.Conn's Write does: all of p, or an error.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return c.TCPConn.Write(p) // for its checks of Close and deadlines
	}
	n, err := c.w.do(p)
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// opError makes err (from the poller, which reports it as a "raw-read" or
// "raw-write", or from the system call) the *net.OpError a TCPConn's Read
// or Write would return.
func (c *Conn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Listen returns l with the connections it accepts wrapped by Wrap.
func Listen(l net.Listener) net.Listener { return listener{l} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}
