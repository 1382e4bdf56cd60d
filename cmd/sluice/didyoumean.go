// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"net"
	"strings"
)

// This file holds the hints for common mistakes on the command line: each
// returns "" when it has nothing better to offer than the error itself.

// storeHint suggests the --store URL meant by raw, a value that is not
// one: a Redis address without its scheme (localhost:6379, redis), or a
// cluster scheme spelt with a dash.
func storeHint(raw string) string {
	if strings.Contains(raw, "@") {
		return "" // never echo a password
	}
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		switch strings.ToLower(scheme) {
		case "redis-cluster", "redis_cluster", "rediscluster", "cluster":
			return "redis+cluster://" + rest
		case "rediss-cluster", "rediss_cluster":
			return "rediss+cluster://" + rest
		case "tcp":
			return "redis://" + rest
		}
		return ""
	}
	if _, port, err := net.SplitHostPort(raw); err == nil && isDigits(port) {
		return "redis://" + raw
	}
	if isDigits(raw) {
		return "redis://localhost:" + raw
	}
	if isHostname(raw) && !strings.HasPrefix(strings.ToLower(raw), "mem") {
		return "redis://" + raw + ":6379"
	}
	return ""
}

// withHint appends " (did you mean HINT?)" to msg when hint is not empty.
func withHint(msg, hint string) string {
	if hint == "" {
		return msg
	}
	return fmt.Sprintf("%s (did you mean %s?)", msg, hint)
}

// checkListenAddr checks an --*-addr value before anything listens: it
// must be HOST:PORT (an empty host listens on every interface). A bare
// port gets both readings as a hint.
func checkListenAddr(flagName, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return nil
	}
	if isDigits(addr) {
		return fmt.Errorf("--%s %q: want HOST:PORT (did you mean :%s, every interface, or 127.0.0.1:%s, this machine only?)", flagName, addr, addr, addr)
	}
	return fmt.Errorf("--%s %q: want HOST:PORT, like 127.0.0.1:8080 or :8080", flagName, addr)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// isHostname reports whether s could be a DNS name or an IPv4 address.
func isHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
		default:
			return false
		}
	}
	return true
}
