// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url   string
		addrs []string
		tls   bool
		pass  string
		db    int
	}{
		{"redis://h:1", []string{"h:1"}, false, "", 0},
		{"redis://u:pw@h:1/2", []string{"h:1"}, false, "pw", 2},
		{"rediss://h:1", []string{"h:1"}, true, "", 0},
		{"redis://h:1?addr=g:2&addr=f:3", []string{"h:1", "g:2", "f:3"}, false, "", 0},
		{"redis+cluster://h:1,g:2,f:3", []string{"h:1", "g:2", "f:3"}, false, "", 0},
		{"rediss+cluster://:pw@h:1,g:2?skip_verify=true", []string{"h:1", "g:2"}, true, "pw", 0},
	} {
		o, err := parseURL(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		if !slices.Equal(o.InitAddress, c.addrs) || (o.TLSConfig != nil) != c.tls || o.Password != c.pass || o.SelectDB != c.db {
			t.Fatalf("%s: addresses %v TLS %v password %q db %d", c.url, o.InitAddress, o.TLSConfig != nil, o.Password, o.SelectDB)
		}
	}
	for _, bad := range []string{"h:1", "http://h:1", "redis+cluster://h:1,,g:2", "redis://u:secret@h:1/notadb",
		"redis://h:1?sentinel_password=secret", "redis://h:1?sentinel_username=u", "redis://h:1?master_set=m&sentinel_password=secret&x=%zz"} {
		_, err := parseURL(bad)
		if err == nil {
			t.Fatalf("%s: no error", bad)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Fatalf("%s: the error shows the password: %v", bad, err)
		}
	}
}

// TestParseSentinelURL: the sentinels' credentials come from their own
// parameters, not the master's, and rediss:// is TLS to both.
func TestParseSentinelURL(t *testing.T) {
	o, err := parseURL("rediss://mu:mpw@s1:26379?addr=s2:26379&master_set=m&sentinel_username=su&sentinel_password=spw")
	if err != nil {
		t.Fatal(err)
	}
	if o.Sentinel.MasterSet != "m" || !slices.Equal(o.InitAddress, []string{"s1:26379", "s2:26379"}) {
		t.Fatalf("master set %q, sentinels %v", o.Sentinel.MasterSet, o.InitAddress)
	}
	if o.Username != "mu" || o.Password != "mpw" || o.Sentinel.Username != "su" || o.Sentinel.Password != "spw" {
		t.Fatalf("master %q:%q, sentinels %q:%q", o.Username, o.Password, o.Sentinel.Username, o.Sentinel.Password)
	}
	if o.TLSConfig == nil || o.Sentinel.TLSConfig == nil || o.Sentinel.TLSConfig == o.TLSConfig {
		t.Fatalf("TLS to the master %v, to the sentinels %v (want both, not shared)", o.TLSConfig != nil, o.Sentinel.TLSConfig != nil)
	}
	o, err = parseURL("redis://s1:26379?master_set=m")
	if err != nil {
		t.Fatal(err)
	}
	if o.Sentinel.Password != "" || o.Sentinel.TLSConfig != nil {
		t.Fatalf("sentinel password %q, TLS %v; want none", o.Sentinel.Password, o.Sentinel.TLSConfig != nil)
	}
	if got := redact("redis://u:p@s:1?master_set=m&sentinel_password=spw&x=1"); strings.Contains(got, "spw") || !strings.Contains(got, "sentinel_password=xxxxx&x=1") {
		t.Fatalf("redacted %q", got)
	}
}

func TestOpen(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	for _, url := range []string{
		"redis://" + sluicetest.StartRedis(t) + "/3",
		"redis+cluster://" + strings.Join(sluicetest.StartRedisCluster(t, 3), ","),
	} {
		s, err := Open(url)
		if err != nil {
			t.Fatalf("Open(%s): %v", url, err)
		}
		for i, want := range []bool{true, true, false} {
			if d := take(t, s, p, "k", 1); d.Allowed != want {
				t.Fatalf("%s: request %d: %+v", url, i, d)
			}
		}
		if strings.HasPrefix(url, "redis+cluster") != s.conn.Load().cluster {
			t.Fatalf("%s: cluster mode %v", url, s.conn.Load().cluster)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open("redis://127.0.0.1:1/x"); err == nil {
		t.Fatal("Open of a bad URL returned no error")
	}
}

// TestStartWhileDown: Open while Redis is down returns a working store
// whose calls fail fast; it connects once Redis is up, within a second; after
// Close calls fail.
func TestStartWhileDown(t *testing.T) {
	srv := sluicetest.StartRedisServer(t)
	srv.Kill()
	s, err := Open("redis://"+srv.Addr, WithTimeout(time.Second), WithBreaker(3, 50*time.Millisecond))
	if err != nil {
		t.Fatalf("Open while Redis is down: %v", err)
	}
	p := sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 5, Period: time.Second}
	for range 20 {
		start := time.Now()
		if d, err := s.Take(t.Context(), p, "k", 1); err == nil {
			t.Fatalf("Take while Redis is down: %+v and no error", d)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("a Take while Redis is down took %v", d)
		}
	}
	if st := s.Stats(); st.DialErrors == 0 || st.ShortCircuited == 0 {
		t.Fatalf("stats while down: %+v", st)
	}
	srv.Restart()
	up := time.Now()
	for {
		if _, err := s.Take(t.Context(), p, "k", 1); err == nil {
			break
		}
		if time.Since(up) > time.Second {
			t.Fatalf("no connection a second after Redis started; stats %+v", s.Stats())
		}
		time.Sleep(5 * time.Millisecond) // polling the reconnecting store
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(t.Context(), p, "k", 1); err == nil {
		t.Fatal("Take after Close returned no error")
	}
}

// TestPing: Ping is nil when Redis answers, and an error when it is down,
// when it refuses the connection's settings (a database index out of
// range), and after Close.
func TestPing(t *testing.T) {
	srv := sluicetest.StartRedisServer(t)
	s, err := Open("redis://" + srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping of a running Redis: %v", err)
	}
	bad, err := Open("redis://" + srv.Addr + "/99")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Ping(t.Context()); err == nil || !strings.Contains(err.Error(), "DB index") {
		t.Errorf("Ping with database 99: %v, want Redis's refusal", err)
	}
	srv.Kill()
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping of a Redis that is down: no error")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Error("Ping after Close: no error")
	}
}
