// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestSentinelTLS: against a sentinel and a master that both speak only
// TLS, Open of a rediss:// Sentinel URL with WithTLSConfig trusting their CA
// reaches the sentinel over TLS, then the master, and makes decisions; the
// state is on the master. Over plain TCP (redis://), or over TLS without
// the CA, Open succeeds but Take fails, within a bounded time.
func TestSentinelTLS(t *testing.T) {
	master, sentinel, roots := sluicetest.StartRedisSentinelTLS(t)
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	trust := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	url := "rediss://" + sentinel + "?master_set=" + sluicetest.SentinelMaster
	s, err := Open(url, WithTLSConfig(trust), WithPrefix("sentineltls:"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admits(t, s, p, "k", true, true, false)
	if got := s.conn.Load().client.Mode(); got != rueidis.ClientModeSentinel {
		t.Fatalf("client mode %v, want sentinel", got)
	}
	if trust.ServerName != "" {
		t.Fatal("Open changed the caller's tls.Config")
	}
	// The state is on the master.
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{master}, TLSConfig: trust.Clone(), DisableRetry: true})
	if err != nil {
		t.Fatalf("connecting to the master %s over TLS: %v", master, err)
	}
	defer c.Close()
	keys, err := c.Do(t.Context(), c.B().Keys().Pattern("sentineltls:*").Build()).AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys on the master %s: %q %v", master, keys, err)
	}

	for i, b := range []struct {
		url  string
		opts []Option
		want string
	}{
		{"redis://" + sentinel + "?master_set=" + sluicetest.SentinelMaster + "&dial_timeout=200ms", nil, ""}, // plain TCP to a TLS sentinel
		{url, nil, "certificate"}, // the system's roots: the test CA is not trusted
	} {
		bad, err := Open(b.url, append(b.opts, WithTimeout(time.Second))...)
		if err != nil {
			t.Fatalf("bad %d: Open(%s): %v (an unreachable sentinel is an error of the calls, not of Open)", i, b.url, err)
		}
		start := time.Now()
		d, err := bad.Take(t.Context(), p, "k", 1)
		el := time.Since(start)
		bad.Close()
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Fatalf("bad %d: %s: %+v %v, want an error with %q", i, b.url, d, err, b.want)
		}
		t.Logf("bad %d: %v in %v", i, err, el)
		if el > 5*time.Second {
			t.Fatalf("bad %d: %s: Take took %v", i, b.url, el)
		}
	}
}
