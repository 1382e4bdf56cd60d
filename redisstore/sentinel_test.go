// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestSentinel: Open of a Sentinel URL (redis://sentinel?master_set=M) makes
// decisions, and they land on the master that the sentinel names; a master
// name the sentinel does not know makes Take fail.
func TestSentinel(t *testing.T) {
	master, sentinel := sluicetest.StartRedisSentinel(t)
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	s, err := Open("redis://"+sentinel+"?master_set="+sluicetest.SentinelMaster, WithPrefix("sentinel:"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admits(t, s, p, "k", true, true, false)
	if got := s.conn.Load().client.Mode(); got != rueidis.ClientModeSentinel {
		t.Fatalf("client mode %v, want sentinel", got)
	}
	// The state is on the master.
	c := newClient(t, master)
	keys, err := c.Do(t.Context(), c.B().Keys().Pattern("sentinel:*").Build()).AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys on the master %s: %q %v", master, keys, err)
	}

	bad, err := Open("redis://"+sentinel+"?master_set=nosuchmaster", WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	start := time.Now()
	d, err := bad.Take(t.Context(), p, "k", 1)
	if err == nil {
		t.Fatalf("an unknown master set: no error: %+v", d)
	}
	if !strings.Contains(err.Error(), "No such master") {
		t.Fatalf("an unknown master set: %v, want the sentinel's \"No such master\"", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("an unknown master set: Take took %v", el)
	}
}

// TestSentinelFailover: a store opened on a Sentinel URL keeps making
// decisions after its master is killed and the sentinel promotes the
// replica, within a bounded time; the decisions then land on the new master,
// and the state written before the failover (replicated: WAIT) is still
// there: of a limit of 3, 2 taken before the kill leave exactly 1 after it.
func TestSentinelFailover(t *testing.T) {
	g := sluicetest.StartRedisSentinelGroup(t)
	// A clock that stands still: the fixed window cannot roll over
	// between the takes before the failover and those after it.
	clock := sluicetest.NewClock(time.Now())
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Hour}
	s, err := Open("redis://"+g.Sentinel+"?master_set="+sluicetest.SentinelMaster,
		WithPrefix("failover:"), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 2 {
		if d := take(t, s, p, "k", 1); !d.Allowed || d.Remaining != int64(2-i) {
			t.Fatalf("before the failover: request %d: %+v", i, d)
		}
	}
	if got := s.conn.Load().client.Mode(); got != rueidis.ClientModeSentinel {
		t.Fatalf("client mode %v, want sentinel", got)
	}
	// The master has the state; wait until the replica has it too.
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{g.Master.Addr}, DisableRetry: true})
	if err != nil {
		t.Fatalf("connecting to the master %s: %v", g.Master.Addr, err)
	}
	n, err := c.Do(t.Context(), c.B().Wait().Numreplicas(1).Timeout(5000).Build()).AsInt64()
	c.Close()
	if err != nil || n != 1 {
		t.Fatalf("WAIT 1 5000 on the master: %d %v, want 1 replica", n, err)
	}

	g.Master.Kill()
	start := time.Now()
	const limit = 30 * time.Second // a failover takes a few seconds
	var lastErr error
	failed := 0
	for {
		// A probe key, so that a call that ran on the new master but
		// timed out (and consumed) cannot change the count of "k".
		_, err := s.Take(t.Context(), p, "probe", 1)
		if err == nil {
			break
		}
		lastErr = err
		failed++
		if time.Since(start) > limit {
			t.Fatalf("no decision %v after the master was killed (%d failed calls); last error: %v", limit, failed, lastErr)
		}
		time.Sleep(20 * time.Millisecond) // polling the sentinel's failover
	}
	took := time.Since(start)
	t.Logf("decisions again %v after the master was killed (%d calls failed meanwhile; last error: %v)", took, failed, lastErr)

	for i, want := range []bool{true, false} {
		if d := take(t, s, p, "k", 1); d.Allowed != want || d.Remaining != 0 {
			t.Fatalf("after the failover: request %d: %+v, want allowed %v with 0 remaining", i, d, want)
		}
	}
	if got, err := g.CurrentMaster(); err != nil || got != g.Replica.Addr {
		t.Fatalf("the sentinel's master after the failover: %q %v, want the replica %s", got, err, g.Replica.Addr)
	}
	// The decisions after the failover are on the promoted replica.
	r := newClient(t, g.Replica.Addr)
	keys, err := r.Do(t.Context(), r.B().Keys().Pattern("failover:*").Build()).AsStrSlice()
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys on the new master %s: %q %v, want 2 (k and probe)", g.Replica.Addr, keys, err)
	}
}

// TestSentinelAuth: a Sentinel and a master that both require passwords,
// different ones: the URL's user:password@ are the master's and
// sentinel_password the sentinels'; without the latter the store cannot
// find its master and says so.
func TestSentinelAuth(t *testing.T) {
	master, sentinel := sluicetest.StartRedisSentinel(t)
	cli := func(addr string, args ...string) {
		t.Helper()
		host, port, _ := strings.Cut(addr, ":")
		out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "OK") {
			t.Fatalf("redis-cli %s %v: %s %v", addr, args, out, err)
		}
	}
	// The sentinel keeps monitoring the master with its password.
	cli(sentinel, "SENTINEL", "SET", sluicetest.SentinelMaster, "auth-pass", "master-pw")
	cli(master, "CONFIG", "SET", "requirepass", "master-pw")
	cli(sentinel, "ACL", "SETUSER", "default", "on", "resetpass", ">sentinel-pw")

	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	base := "redis://:master-pw@" + sentinel + "?master_set=" + sluicetest.SentinelMaster
	s, err := Open(base+"&sentinel_password=sentinel-pw", WithPrefix("auth:"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admits(t, s, p, "k", true, true, false)

	for _, url := range []string{base, "redis://" + sentinel + "?master_set=" + sluicetest.SentinelMaster + "&sentinel_password=sentinel-pw"} {
		bad, err := Open(url, WithTimeout(time.Second))
		if err != nil {
			t.Fatalf("Open(%s): %v (a refused password is an error of the calls, not of Open)", url, err)
		}
		d, err := bad.Take(t.Context(), p, "k", 1)
		bad.Close()
		if err == nil {
			t.Fatalf("%s: no error: %+v", url, d)
		}
		t.Logf("%s: %v", redact(url), err)
		if msg := err.Error(); !strings.Contains(msg, "NOAUTH") && !strings.Contains(msg, "WRONGPASS") {
			t.Fatalf("%s: %v, want an authentication error", url, err)
		}
	}
}
