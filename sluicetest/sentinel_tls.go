// SPDX-License-Identifier: Apache-2.0

package sluicetest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
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
