package sluicetest

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartRedisSentinelTLS is StartRedisSentinel over TLS: it starts a master
// redis-server and one Redis Sentinel that monitors it as SentinelMaster
// with a quorum of 1, both on free loopback ports and both speaking only
// TLS (port 0, tls-port port, no client certificates required), with server
// certificates for 127.0.0.1 issued by a throwaway CA made for this test.
// The sentinel talks to the master over TLS too (tls-replication yes). It
// waits until the sentinel has had the master's INFO over that link, and
// returns both addresses ("127.0.0.1:port") and a pool holding the CA, which
// a client of either must trust. The processes are killed when the test
// ends.
//
// It needs a redis-server on PATH built with TLS support; see StartRedis.
func StartRedisSentinelTLS(t testing.TB) (master, sentinel string, roots *x509.CertPool) {
	t.Helper()
	f := newTLSFiles(t)
	conf := &tls.Config{RootCAs: f.roots, MinVersion: tls.VersionTLS12}
	master = startRedisArgs(t, func(port int) []string {
		return f.serverArgs(port, "no")
	}, func(addr string) bool { return pingsTLS(addr, conf) })
	runID, err := masterRunID(master, conf)
	if err != nil {
		t.Fatalf("sluicetest: the run_id of the master %s: %v", master, err)
	}
	listen := func(port int) string {
		return fmt.Sprintf("port 0\ntls-port %d\ntls-cert-file %q\ntls-key-file %q\ntls-ca-cert-file %q\n"+
			"tls-auth-clients no\ntls-replication yes\n", port, f.cert, f.key, f.ca)
	}
	sentinel = startSentinelListen(t, master, listen, "sentinel down-after-milliseconds %[1]s 5000\n", func(addr string) bool {
		// The sentinel knows the master's run ID once it has had an
		// INFO reply from the master, over TLS.
		reply, err := tlsCommand(addr, conf, "SENTINEL", "MASTER", SentinelMaster)
		return err == nil && field(reply, "runid") == runID
	})
	return master, sentinel, f.roots
}

// masterRunID returns the run_id in the INFO of the TLS server at addr.
func masterRunID(addr string, conf *tls.Config) (string, error) {
	reply, err := tlsCommand(addr, conf, "INFO", "server")
	if err != nil {
		return "", err
	}
	if len(reply) == 1 {
		for _, line := range strings.Split(reply[0], "\r\n") {
			if id, ok := strings.CutPrefix(line, "run_id:"); ok && id != "" {
				return id, nil
			}
		}
	}
	return "", fmt.Errorf("no run_id in INFO server: %q", reply)
}

// field returns the value that follows name in a flattened reply of
// alternating names and values, such as SENTINEL MASTER's, or "".
func field(reply []string, name string) string {
	for i := 0; i+1 < len(reply); i += 2 {
		if reply[i] == name {
			return reply[i+1]
		}
	}
	return ""
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
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(encodeCommand(args)); err != nil {
		return nil, err
	}
	return readFlat(bufio.NewReader(c), nil)
}

// readFlat reads one RESP2 reply from r and appends it, flattened, to out.
func readFlat(r *bufio.Reader, out []string) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return out, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return out, fmt.Errorf("redis: empty reply line")
	}
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
			if out, err = readFlat(r, out); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	return out, fmt.Errorf("redis: bad reply %q", line)
}
