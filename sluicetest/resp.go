// SPDX-License-Identifier: Apache-2.0

package sluicetest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The package's own small Redis client, for starting and checking servers
// without a client library: one command per fresh connection, RESP2.

// redisCommand sends one command over a fresh connection and returns the
// reply as text: a simple or bulk string (a nil bulk string as ""), an error
// reply as an error, and for an array only its header line ("*2", "*-1").
func redisCommand(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	r, err := send(c, args)
	if err != nil {
		return "", err
	}
	line, err := readLine(r)
	if err != nil || strings.HasPrefix(line, "*") {
		return line, err
	}
	reply, err := readFlat(r, line, nil)
	if err != nil || len(reply) == 0 {
		return "", err
	}
	return reply[0], nil
}

// tlsCommand sends one command over a fresh TLS connection with conf and
// returns the reply flattened: the elements of arrays, nested ones
// included, in order, as text (integers in decimal, nil replies left out);
// an error reply is an error.
func tlsCommand(addr string, conf *tls.Config, args ...string) ([]string, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: conf}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r, err := send(c, args)
	if err != nil {
		return nil, err
	}
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	return readFlat(r, line, nil)
}

// pingsTLS reports whether the server at addr answers PING with PONG over
// TLS with conf.
func pingsTLS(addr string, conf *tls.Config) bool {
	reply, err := tlsCommand(addr, conf, "PING")
	return err == nil && len(reply) == 1 && reply[0] == "PONG"
}

// send writes the command args on c, with a second for it and its reply,
// and returns a reader of the reply.
func send(c net.Conn, args []string) (*bufio.Reader, error) {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(encodeCommand(args)); err != nil {
		return nil, err
	}
	return bufio.NewReader(c), nil
}

// encodeCommand returns the command args in RESP, as a client sends it.
func encodeCommand(args []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return []byte(b.String())
}

// readLine reads one line of a reply, without its CRLF.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("redis: empty reply line")
	}
	return line, nil
}

// readFlat reads the rest of the reply whose first line is line from r and
// appends it, flattened, to out.
func readFlat(r *bufio.Reader, line string, out []string) ([]string, error) {
	switch line[0] {
	case '+', ':':
		return append(out, line[1:]), nil
	case '-':
		return out, fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < -1 {
			return out, fmt.Errorf("redis: bad reply %q", line)
		}
		if n == -1 {
			return out, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return out, err
		}
		return append(out, string(buf[:n])), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < -1 {
			return out, fmt.Errorf("redis: bad reply %q", line)
		}
		for range n {
			next, err := readLine(r)
			if err != nil {
				return out, err
			}
			if out, err = readFlat(r, next, out); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	return out, fmt.Errorf("redis: bad reply %q", line)
}
