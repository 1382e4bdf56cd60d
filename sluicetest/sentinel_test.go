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
