// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestTLS: Open of a rediss:// URL makes decisions over TLS when the client
// trusts the server's CA (WithTLSConfig) or skips verification
// (skip_verify=true); without either, or over plain TCP, Take fails; and
// WithTLSConfig with a redis:// URL is refused.
func TestTLS(t *testing.T) {
	addr, roots := sluicetest.StartRedisTLS(t)
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	trust := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	for i, c := range []struct {
		url  string
		opts []Option
	}{
		{"rediss://" + addr + "/1", []Option{WithTLSConfig(trust)}},
		{"rediss+cluster://" + addr + "/2", []Option{WithTLSConfig(trust)}}, // not a cluster: rueidis falls back to standalone
		{"rediss://" + addr + "/3?skip_verify=true", nil},
	} {
		s, err := Open(c.url, c.opts...)
		if err != nil {
			t.Fatalf("%d: Open(%s): %v", i, c.url, err)
		}
		for j, want := range []bool{true, true, false} {
			d, err := s.Take(t.Context(), p, "k", 1)
			if err != nil || d.Allowed != want {
				t.Fatalf("%d: %s: request %d: %+v %v", i, c.url, j, d, err)
			}
		}
		s.Close()
	}
	if trust.ServerName != "" {
		t.Fatal("Open changed the caller's tls.Config")
	}

	for i, c := range []struct {
		url  string
		opts []Option
		want string
	}{
		{"rediss://" + addr, nil, "certificate"},                                    // the test CA is not trusted
		{"rediss://" + addr, []Option{WithTLSConfig(&tls.Config{})}, "certificate"}, // nor here
		{"redis://" + addr + "?dial_timeout=200ms", nil, ""},                        // plain TCP to a TLS port
	} {
		s, err := Open(c.url, c.opts...)
		if err != nil {
			t.Fatalf("bad %d: Open(%s): %v", i, c.url, err)
		}
		start := time.Now()
		d, err := s.Take(t.Context(), p, "k", 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("bad %d: %s: %+v %v, want an error with %q", i, c.url, d, err, c.want)
		}
		t.Logf("bad %d: %v in %v", i, err, time.Since(start))
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("bad %d: %s: Take took %v", i, c.url, el)
		}
		s.Close()
	}

	if _, err := Open("redis://"+addr, WithTLSConfig(trust)); err == nil || !strings.Contains(err.Error(), "rediss://") {
		t.Fatalf("WithTLSConfig with a redis:// URL: %v, want an error", err)
	}
}

// TestMTLS: against a server that requires client certificates, a store
// opened with rediss:// and WithTLSConfig carrying a client certificate
// issued by the server's CA makes decisions; one without a client
// certificate opens (neither failing nor hanging) but its Take fails.
func TestMTLS(t *testing.T) {
	addr, roots, client := sluicetest.StartRedisMTLS(t)
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}

	mutual := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}, MinVersion: tls.VersionTLS12}
	s, err := Open("rediss://"+addr, WithTLSConfig(mutual))
	if err != nil {
		t.Fatalf("Open with a client certificate: %v", err)
	}
	defer s.Close()
	for i, want := range []bool{true, true, false} {
		d, err := s.Take(t.Context(), p, "k", 1)
		if err != nil || d.Allowed != want {
			t.Fatalf("with a client certificate: request %d: %+v %v", i, d, err)
		}
	}

	for i, c := range []struct {
		conf *tls.Config
		want string
	}{
		// TLS 1.3: the client's side of the handshake completes, and the
		// server's refusal shows when the client writes (a reset, or
		// the alert "certificate required").
		{&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, ""},
		// TLS 1.2: the server refuses in the handshake, with an alert.
		{&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12}, "tls: "},
	} {
		start := time.Now()
		s, err := Open("rediss://"+addr, WithTLSConfig(c.conf))
		if err != nil {
			t.Fatalf("bad %d: Open without a client certificate: %v, want the error from Take", i, err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("bad %d: Open without a client certificate took %v", i, el)
		}
		start = time.Now()
		d, err := s.Take(t.Context(), p, "k2", 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("bad %d: without a client certificate: %+v %v, want an error with %q", i, d, err, c.want)
		}
		el := time.Since(start)
		t.Logf("bad %d: %v in %v", i, err, el)
		if el > 5*time.Second {
			t.Fatalf("bad %d: without a client certificate: Take took %v", i, el)
		}
		s.Close()
	}
}
