package sluicetest

import (
	"crypto/tls"
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
