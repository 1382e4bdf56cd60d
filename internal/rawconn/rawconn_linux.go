package rawconn

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Conn is a *net.TCPConn whose Read and Write are raw system calls. Its
// other methods are the TCPConn's.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// A read's buffer and result, in fields (under rmu) so that the
	// function handed to rc.Read is made once, in Wrap, not per call.
	rmu    sync.Mutex
	rbuf   []byte
	rn     int
	rerrno syscall.Errno
	readFn func(fd uintptr) bool

	// The same for writes, under wmu.
	wmu     sync.Mutex
	wbuf    []byte
	wn      int
	werrno  syscall.Errno
	writeFn func(fd uintptr) bool
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
	w := &Conn{TCPConn: tc, rc: rc}
	w.readFn = w.read
	w.writeFn = w.write
	return w
}

// read is one read(2) into rbuf. It returns false, to have the poller wait,
// when the socket has nothing to read.
func (c *Conn) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.rn, c.rerrno = int(n), e
		return true
	}
}

// write writes the rest of wbuf. It returns false, to have the poller wait,
// when the socket's send buffer is full.
func (c *Conn) write(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.wbuf[c.wn])), uintptr(len(c.wbuf)-c.wn))
		switch e {
		case 0:
			c.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werrno = e
			return true
		}
	}
	return true
}

// Read reads as net.Conn's Read does.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	c.rbuf, c.rn, c.rerrno = p, 0, 0
	err := c.rc.Read(c.readFn)
	n, errno := c.rn, c.rerrno
	c.rbuf = nil
	c.rmu.Unlock()
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes as net.Conn's Write does: all of p, or an error.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	c.wbuf, c.wn, c.werrno = p, 0, 0
	err := c.rc.Write(c.writeFn)
	n, errno := c.wn, c.werrno
	c.wbuf = nil
	c.wmu.Unlock()
	if err == nil && errno != 0 {
		err = os.NewSyscallError("write", errno)
	}
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
