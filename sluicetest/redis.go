// SPDX-License-Identifier: Apache-2.0

package sluicetest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// redisStartTimeout bounds how long a started server (or a Cluster's
// creation, whose nodes gossip until they agree) may take to be ready. It
// only bounds a failure: a ready server is used at once. 10 s was too
// short for `redis-cli --cluster create` on a loaded 2-CPU host.
const redisStartTimeout = 60 * time.Second

// StartRedis starts a standalone redis-server on a free loopback port, with
// persistence off and its working files in a temporary directory, waits
// until it answers PING, and returns its address ("127.0.0.1:port"). The
// server is killed when the test ends.
//
// It needs redis-server on PATH. When it is missing the test fails (it is
// never skipped): run .ci/install-redis, which `make test` does.
func StartRedis(t testing.TB) string {
	t.Helper()
	return StartRedisServer(t).Addr
}

// RedisServer is a standalone redis-server started by StartRedisServer,
// which a test can kill and start again on the same port.
type RedisServer struct {
	// Addr is the server's address, "127.0.0.1:port".
	Addr string

	t     testing.TB
	bin   string
	dir   string
	port  int
	extra []string // redis-server arguments after serverArgs' (a replica's --replicaof)

	mu   sync.Mutex
	stop func() // kills the running process; nil when stopped
}

// StartRedisServer is StartRedis, returning a handle on the server.
func StartRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	return startRedisServerExtra(t)
}

// startRedisServerExtra is StartRedisServer with extra redis-server
// arguments, which Restart passes again.
func startRedisServerExtra(t testing.TB, extra ...string) *RedisServer {
	t.Helper()
	s := &RedisServer{t: t, bin: lookRedisBinary(t, "redis-server"), dir: t.TempDir(), extra: extra}
	for attempt := 0; ; attempt++ {
		s.port = freePort(t)
		stop, err := startRedisServer(s.bin, s.dir, s.port, s.extra...)
		if err == nil {
			s.stop = stop
			break
		}
		if attempt >= 5 {
			t.Fatalf("sluicetest: starting redis-server: %v", err)
		}
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	t.Cleanup(s.Kill)
	return s
}

// Kill kills the server (SIGKILL) and waits for it to exit. Its data is
// lost. Killing a stopped server does nothing.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

// Restart starts a killed server again on the same port, empty, and waits
// until it answers PING. It fails the test if it cannot (another process
// took the port, say).
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.t.Fatal("sluicetest: Restart of a running redis-server")
	}
	stop, err := startRedisServer(s.bin, s.dir, s.port, s.extra...)
	if err != nil {
		s.t.Fatalf("sluicetest: restarting redis-server on port %d: %v", s.port, err)
	}
	s.stop = stop
}

// StartRedisCluster starts a Redis Cluster of masters redis-server processes
// (at least 3) on free loopback ports, with no replicas, joins them with
// `redis-cli --cluster create`, waits until every node reports
// cluster_state:ok, and returns the nodes' addresses. The servers are killed
// when the test ends.
//
// It needs redis-server and redis-cli on PATH; see StartRedis.
func StartRedisCluster(t testing.TB, masters int) []string {
	t.Helper()
	if masters < 3 {
		t.Fatalf("sluicetest: a Redis Cluster needs at least 3 masters, not %d", masters)
	}
	bin := lookRedisBinary(t, "redis-server")
	cli := lookRedisBinary(t, "redis-cli")
	addrs := make([]string, 0, masters)
	for i := range masters {
		dir := filepath.Join(t.TempDir(), fmt.Sprint("node", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for attempt := 0; ; attempt++ {
			// A cluster node also listens on port+10000 (the bus port).
			port := freePort(t)
			if port+10000 > 65535 || !portFree(port+10000) {
				continue
			}
			stop, err := startRedisServer(bin, dir, port,
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "5000")
			if err == nil {
				t.Cleanup(stop)
				addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
				break
			}
			if attempt >= 5 {
				t.Fatalf("sluicetest: starting cluster node %d: %v", i, err)
			}
		}
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), redisStartTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("sluicetest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(redisStartTimeout)
	for _, addr := range addrs {
		for {
			info, err := redisCommand(addr, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sluicetest: cluster node %s not ready after %v: %q %v", addr, redisStartTimeout, info, err)
			}
			time.Sleep(20 * time.Millisecond) // polling a starting server
		}
	}
	return addrs
}

// lookRedisBinary returns the path of name or fails the test.
func lookRedisBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("sluicetest: %s is not on PATH: the Redis tests need a real server. "+
			"Install it with .ci/install-redis (make test runs it; it uses apt-get install redis-server redis-tools as root)", name)
	}
	return p
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sluicetest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// startRedisServer starts bin on port and waits for PING. On success it
// returns a function that kills the process and waits for it; on failure
// the process is already gone.
func startRedisServer(bin, dir string, port int, extra ...string) (stop func(), err error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return startProcess(bin, serverArgs(port, dir, extra...), func() bool {
		reply, err := redisCommand(addr, "PING")
		return err == nil && reply == "PONG"
	})
}

// serverArgs are the arguments of a throwaway redis-server on port: loopback
// only, no persistence, files in dir, logs to stdout; then extra.
func serverArgs(port int, dir string, extra ...string) []string {
	return append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", "",
	}, extra...)
}

// syncBuffer is a bytes.Buffer safe for the process's writes and our reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
