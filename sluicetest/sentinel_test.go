// SPDX-License-Identifier: Apache-2.0

package sluicetest

import (
	"strings"
	"testing"
)

func TestStartRedisSentinel(t *testing.T) {
	master, sentinel := StartRedisSentinel(t)
	if reply, err := redisCommand(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster); err != nil || reply != "*2" {
		t.Fatalf("GET-MASTER-ADDR-BY-NAME on %s: %q %v", sentinel, reply, err)
	}
	if reply, err := redisCommand(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "nosuchmaster"); err != nil || !strings.HasPrefix(reply, "*-1") && reply != "" {
		t.Fatalf("GET-MASTER-ADDR-BY-NAME of an unknown master on %s: %q %v", sentinel, reply, err)
	}
	if reply, err := redisCommand(master, "PING"); err != nil || reply != "PONG" {
		t.Fatalf("PING on master %s: %q %v", master, reply, err)
	}
}

func TestStartRedisSentinelGroup(t *testing.T) {
	g := StartRedisSentinelGroup(t)
	if got, err := g.CurrentMaster(); err != nil || got != g.Master.Addr {
		t.Fatalf("CurrentMaster: %q %v, want %s", got, err, g.Master.Addr)
	}
	if reply, err := redisCommand(g.Master.Addr, "SET", "k", "v"); err != nil || reply != "OK" {
		t.Fatalf("SET on the master: %q %v", reply, err)
	}
	if _, err := redisCommand(g.Replica.Addr, "SET", "k", "v"); err == nil || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("SET on the replica: %v, want READONLY", err)
	}
	info, err := redisCommand(g.Replica.Addr, "INFO", "replication")
	if err != nil || !strings.Contains(info, "role:slave") || !strings.Contains(info, "master_link_status:up") {
		t.Fatalf("INFO replication of the replica: %q %v", info, err)
	}
}
