// SPDX-License-Identifier: Apache-2.0

package sluicetest

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// StartRedisArgs starts a standalone redis-server on a free loopback port
// with the arguments args(port), for servers that StartRedis cannot start:
// with a password (--requirepass), ACL users (--user) or TLS only (--port 0
// --tls-port port). Persistence is off, the server is bound to 127.0.0.1 and
// its working files are in a temporary directory; args come after those
// settings and may override them. It waits until the server replies to
// PING (with PONG, or an error such as NOAUTH) over plain TCP, and returns
// "127.0.0.1:port". The server is killed when the test ends. For a server
// that only speaks TLS, see StartRedisTLS.
//
// It needs redis-server on PATH; see StartRedis.
func StartRedisArgs(t testing.TB, args func(port int) []string) string {
	t.Helper()
	return startRedisArgs(t, args, replies)
}

func startRedisArgs(t testing.TB, args func(port int) []string, ready func(addr string) bool) string {
	t.Helper()
	bin := lookRedisBinary(t, "redis-server")
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		stop, err := startProcess(bin, serverArgs(port, dir, args(port)...), func() bool { return ready(addr) })
		if err == nil {
			t.Cleanup(stop)
			return addr
		}
		if attempt >= 5 {
			t.Fatalf("sluicetest: starting redis-server on port %d: %v", port, err)
		}
	}
}

// replies reports whether the server at addr replies to PING, with PONG or
// an error.
func replies(addr string) bool {
	reply, err := redisCommand(addr, "PING")
	return err == nil && reply == "PONG" || err != nil && strings.HasPrefix(err.Error(), "redis: ")
}

// startProcess starts bin with args and waits until ready reports true. On
// success it returns a function that kills the process and waits for it; on
// failure (the process exited, or was not ready within redisStartTimeout)
// the process is already gone.
func startProcess(bin string, args []string, ready func() bool) (stop func(), err error) {
	cmd := exec.Command(bin, args...)
	var out syncBuffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(redisStartTimeout)
	for !ready() {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("%s exited: %v\n%s", bin, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return nil, fmt.Errorf("%s not ready within %v\n%s", bin, redisStartTimeout, out.String())
		}
		time.Sleep(10 * time.Millisecond) // polling a starting server
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
	}, nil
}
