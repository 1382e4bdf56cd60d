// SPDX-License-Identifier: Apache-2.0

package sluicetest

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"
)

func TestStartRedisArgs(t *testing.T) {
	addr := StartRedisArgs(t, func(int) []string { return []string{"--requirepass", "sesame"} })
	if _, err := redisCommand(addr, "GET", "k"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("GET without AUTH on %s: %v, want NOAUTH", addr, err)
	}
}

func TestStartRedisTLS(t *testing.T) {
	addr, roots := StartRedisTLS(t)
	if !pingsTLS(addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}) {
		t.Fatalf("no PONG over TLS from %s", addr)
	}
	if pingsTLS(addr, &tls.Config{MinVersion: tls.VersionTLS12}) {
		t.Fatalf("%s: a client that does not trust the test CA connected", addr)
	}
	if _, err := redisCommand(addr, "PING"); err == nil {
		t.Fatalf("%s answered PING over plain TCP", addr)
	}
}

func TestStartRedisMTLS(t *testing.T) {
	addr, roots, client := StartRedisMTLS(t)
	if !pingsTLS(addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}, MinVersion: tls.VersionTLS12}) {
		t.Fatalf("no PONG over TLS from %s with the client certificate", addr)
	}
	if pingsTLS(addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}) {
		t.Fatalf("%s: a client without a certificate got PONG", addr)
	}
	other := newTestCA(t)
	certPEM, keyPEM := other.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "stranger"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	stranger, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if pingsTLS(addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{stranger}, MinVersion: tls.VersionTLS12}) {
		t.Fatalf("%s: a client with a certificate of another CA got PONG", addr)
	}
	if _, err := redisCommand(addr, "PING"); err == nil {
		t.Fatalf("%s answered PING over plain TCP", addr)
	}
}
