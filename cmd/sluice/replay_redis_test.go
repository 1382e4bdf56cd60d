// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/sluicetest"
)

// TestReplayRedisMatchesMemory replays every example trace through every
// algorithm on a real Redis server and on the memory store: the outputs
// must be identical, byte for byte.
func TestReplayRedisMatchesMemory(t *testing.T) {
	url := "redis://" + sluicetest.StartRedis(t)
	traces, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.trace"))
	if err != nil || len(traces) == 0 {
		t.Fatalf("no example traces: %v", err)
	}
	policies := [][]string{
		{"--algorithm", "token-bucket", "--limit", "5", "--period", "1s", "--burst", "10"},
		{"--algorithm", "gcra", "--limit", "100", "--period", "1m"},
		{"--algorithm", "leaky-bucket", "--limit", "3000", "--period", "1s", "--burst", "5000"},
		{"--algorithm", "fixed-window", "--limit", "100", "--period", "1m"},
		{"--algorithm", "sliding-log", "--limit", "100", "--period", "1m"},
		{"--algorithm", "sliding-window", "--limit", "50", "--period", "1m"},
	}
	for _, trace := range traces {
		data, err := os.ReadFile(trace)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range policies {
			args := append([]string{"replay"}, p...)
			code, mem, stderr := runSluice(t, string(data), args...)
			if code != 0 {
				t.Fatalf("%s %v on memory: exit %d: %s", trace, p, code, stderr)
			}
			code, red, stderr := runSluice(t, string(data), append(args, "--store", url)...)
			if code != 0 {
				t.Fatalf("%s %v on redis: exit %d: %s", trace, p, code, stderr)
			}
			if red != mem {
				t.Errorf("%s %v: redis output differs from memory:\nmemory:\n%.600s\nredis:\n%.600s", trace, p, mem, red)
			}
		}
	}
}
