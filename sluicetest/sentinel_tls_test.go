// SPDX-License-Identifier: Apache-2.0

package sluicetest

import (
	"crypto/tls"
	"net"
	"testing"
)

func TestStartRedisSentinelTLS(t *testing.T) {
	master, sentinel, roots := StartRedisSentinelTLS(t)
	conf := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	host, port, _ := net.SplitHostPort(master)
	reply, err := tlsCommand(sentinel, conf, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
	if err != nil || len(reply) != 2 || reply[0] != host || reply[1] != port {
		t.Fatalf("GET-MASTER-ADDR-BY-NAME on %s over TLS: %q %v, want [%s %s]", sentinel, reply, err, host, port)
	}
	reply, err = tlsCommand(sentinel, conf, "SENTINEL", "MASTER", SentinelMaster)
	if err != nil || field(reply, "flags") != "master" {
		t.Fatalf("SENTINEL MASTER on %s over TLS: flags %q %v, want master (up, connected)", sentinel, field(reply, "flags"), err)
	}
	if !pingsTLS(master, conf) {
		t.Fatalf("no PONG from the master %s over TLS", master)
	}
	// Neither speaks plain TCP.
	for _, addr := range []string{master, sentinel} {
		if reply, err := redisCommand(addr, "PING"); err == nil {
			t.Fatalf("PING on %s over plain TCP: %q, want an error", addr, reply)
		}
	}
	// Nor TLS with a client that does not trust the test CA.
	if _, err := tlsCommand(sentinel, &tls.Config{MinVersion: tls.VersionTLS12}, "PING"); err == nil {
		t.Fatalf("PING on %s over TLS without the test CA: no error", sentinel)
	}
}
