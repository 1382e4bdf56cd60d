// SPDX-License-Identifier: Apache-2.0

package sluicetest

import (
	"strings"
	"testing"
)

func TestStartRedis(t *testing.T) {
	addr := StartRedis(t)
	if reply, err := redisCommand(addr, "SET", "k", "v"); err != nil || reply != "OK" {
		t.Fatalf("SET on %s: %q %v", addr, reply, err)
	}
	if reply, err := redisCommand(addr, "GET", "k"); err != nil || reply != "v" {
		t.Fatalf("GET on %s: %q %v", addr, reply, err)
	}
}

func TestStartRedisCluster(t *testing.T) {
	addrs := StartRedisCluster(t, 3)
	if len(addrs) != 3 {
		t.Fatalf("got %d nodes, want 3", len(addrs))
	}
	for _, a := range addrs {
		info, err := redisCommand(a, "CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_known_nodes:3") || !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("node %s: %q %v", a, info, err)
		}
	}
}

func TestRedisServerRestart(t *testing.T) {
	s := StartRedisServer(t)
	if reply, err := redisCommand(s.Addr, "SET", "k", "v"); err != nil || reply != "OK" {
		t.Fatalf("SET: %q %v", reply, err)
	}
	s.Kill()
	if _, err := redisCommand(s.Addr, "PING"); err == nil {
		t.Fatal("a killed server answered PING")
	}
	s.Restart()
	if reply, err := redisCommand(s.Addr, "GET", "k"); err != nil || reply != "" {
		t.Fatalf("GET after a restart: %q %v, want nothing (no persistence)", reply, err)
	}
}
