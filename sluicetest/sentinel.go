package sluicetest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
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
	_, mport, _ := net.SplitHostPort(master)
	bin := lookRedisBinary(t, "redis-server")
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		// Sentinel rewrites its configuration file: it must be writable.
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", attempt))
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\ndaemonize no\nlogfile \"\"\n"+
			"sentinel monitor %s 127.0.0.1 %s 1\n"+
			"sentinel down-after-milliseconds %s 5000\n",
			port, dir, SentinelMaster, mport, SentinelMaster)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		stop, err := startProcess(bin, []string{conf, "--sentinel"}, func() bool {
			// An array reply (*2: host and port) once the sentinel
			// knows the master.
			reply, err := redisCommand(addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
			return err == nil && reply == "*2"
		})
		if err == nil {
			t.Cleanup(stop)
			return master, addr
		}
		if attempt >= 5 {
			t.Fatalf("sluicetest: starting redis-server --sentinel on port %d: %v", port, err)
		}
	}
}
