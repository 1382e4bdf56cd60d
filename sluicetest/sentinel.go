// SPDX-License-Identifier: Apache-2.0

package sluicetest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the name under which StartRedisSentinel's sentinel
// monitors its master: the master_set of a Sentinel URL.
const SentinelMaster = "mymaster"

// StartRedisSentinel starts a standalone redis-server (the master) and one
// Redis Sentinel (redis-server --sentinel) that monitors it as
// SentinelMaster with a quorum of 1, both on free loopback ports, waits
// until the sentinel names the master, and returns both addresses
// ("127.0.0.1:port"). The processes are killed when the test ends.
//
// It needs redis-server on PATH, and fails the test (never skips) when it is
// missing; see StartRedis.
func StartRedisSentinel(t testing.TB) (master, sentinel string) {
	t.Helper()
	master = StartRedis(t)
	sentinel = startSentinel(t, master, "sentinel down-after-milliseconds %[1]s 5000\n", func(addr string) bool {
		// An array reply (*2: host and port) once the sentinel knows
		// the master.
		reply, err := redisCommand(addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
		return err == nil && reply == "*2"
	})
	return master, sentinel
}

// SentinelGroup is a master, its replica and a Sentinel that monitors them,
// started by StartRedisSentinelGroup for tests of a failover: kill Master
// and the sentinel promotes Replica.
type SentinelGroup struct {
	// Master is the master at the start.
	Master *RedisServer
	// Replica replicates Master; it is the only replica, so the one the
	// sentinel promotes when Master fails.
	Replica *RedisServer
	// Sentinel is the sentinel's address ("127.0.0.1:port"), which
	// monitors Master as SentinelMaster: the host of a Sentinel URL.
	Sentinel string
}

// Sentinel timings of StartRedisSentinelGroup: a master that does not
// answer for SentinelDownAfter is down, and the sentinel then fails over to
// the replica (with one sentinel and a quorum of 1, no other sentinel has to
// agree). A failover typically completes a few seconds after the kill.
const (
	// SentinelDownAfter is the sentinel's down-after-milliseconds.
	SentinelDownAfter = 500 * time.Millisecond
	// SentinelFailoverTimeout is the sentinel's failover-timeout.
	SentinelFailoverTimeout = 5 * time.Second
)

// StartRedisSentinelGroup starts a master redis-server, a replica of it
// (--replicaof) and one Redis Sentinel that monitors the master as
// SentinelMaster with a quorum of 1 and short timings (SentinelDownAfter,
// SentinelFailoverTimeout), all on free loopback ports. It waits until the
// replica is in sync with the master and the sentinel knows both. The
// processes are killed when the test ends.
//
// A test kills the master with g.Master.Kill(); the sentinel then promotes
// the replica, and CurrentMaster reports it. Replication is asynchronous:
// to be sure that a write reached the replica before the kill, send WAIT 1
// <timeout> to the master.
//
// It needs redis-server on PATH; see StartRedis.
func StartRedisSentinelGroup(t testing.TB) *SentinelGroup {
	t.Helper()
	// No delay before the replica's first sync (the default waits 5 s
	// for more replicas).
	g := &SentinelGroup{Master: startRedisServerExtra(t, "--repl-diskless-sync-delay", "0")}
	host, port, _ := net.SplitHostPort(g.Master.Addr)
	g.Replica = startRedisServerExtra(t, "--replicaof", host, port)
	deadline := time.Now().Add(redisStartTimeout)
	for {
		info, err := redisCommand(g.Master.Addr, "INFO", "replication")
		_, rport, _ := net.SplitHostPort(g.Replica.Addr)
		if err == nil && strings.Contains(info, "port="+rport+",state=online") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluicetest: replica %s not in sync with %s after %v: %q %v", g.Replica.Addr, g.Master.Addr, redisStartTimeout, info, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a starting server
	}
	conf := fmt.Sprintf("sentinel down-after-milliseconds %%[1]s %d\nsentinel failover-timeout %%[1]s %d\n",
		SentinelDownAfter.Milliseconds(), SentinelFailoverTimeout.Milliseconds())
	g.Sentinel = startSentinel(t, g.Master.Addr, conf, func(addr string) bool {
		// The sentinel learns of the replica from the master's INFO.
		info, err := redisCommand(addr, "INFO", "sentinel")
		return err == nil && strings.Contains(info, "status=ok,address="+g.Master.Addr+",slaves=1,")
	})
	return g
}

// CurrentMaster returns the address ("127.0.0.1:port") of the master that
// the sentinel names now: Master's before a failover, Replica's after it.
func (g *SentinelGroup) CurrentMaster() (string, error) {
	info, err := redisCommand(g.Sentinel, "INFO", "sentinel")
	if err != nil {
		return "", err
	}
	_, rest, ok := strings.Cut(info, "name="+SentinelMaster+",")
	if ok {
		_, rest, ok = strings.Cut(rest, "address=")
	}
	if !ok {
		return "", fmt.Errorf("sluicetest: no master %s in the INFO of sentinel %s: %q", SentinelMaster, g.Sentinel, info)
	}
	addr, _, _ := strings.Cut(rest, ",")
	return addr, nil
}

// startSentinel starts a Sentinel (redis-server --sentinel) on a free
// loopback port that monitors master as SentinelMaster with a quorum of 1,
// with the further configuration lines conf (a format in which %[1]s is
// SentinelMaster), and waits until ready reports true of its address.
func startSentinel(t testing.TB, master, conf string, ready func(addr string) bool) string {
	t.Helper()
	return startSentinelListen(t, master, func(port int) string { return fmt.Sprintf("port %d\n", port) }, conf, ready)
}

// startSentinelListen is startSentinel with the configuration lines that
// make the sentinel listen on port, listen(port): "port N\n" for plain TCP,
// or "port 0\ntls-port N\n" and the TLS files for TLS only.
func startSentinelListen(t testing.TB, master string, listen func(port int) string, conf string, ready func(addr string) bool) string {
	t.Helper()
	mhost, mport, _ := net.SplitHostPort(master)
	bin := lookRedisBinary(t, "redis-server")
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		// Sentinel rewrites its configuration file: it must be writable.
		file := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", attempt))
		text := listen(port) + fmt.Sprintf("bind 127.0.0.1\ndir %s\ndaemonize no\nlogfile \"\"\n"+
			"sentinel monitor %s %s %s 1\n",
			dir, SentinelMaster, mhost, mport) + fmt.Sprintf(conf, SentinelMaster)
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		stop, err := startProcess(bin, []string{file, "--sentinel"}, func() bool { return ready(addr) })
		if err == nil {
			t.Cleanup(stop)
			return addr
		}
		if attempt >= 5 {
			t.Fatalf("sluicetest: starting redis-server --sentinel on port %d: %v", port, err)
		}
	}
}
