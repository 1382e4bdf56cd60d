// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/sluicetest"
)

// TestAvailableMemory: the cgroup's limit when one is set (v2, then v1),
// else MemAvailable, else the fallback; the key budget follows the formula.
func TestAvailableMemory(t *testing.T) {
	defer func(f func(string) ([]byte, error)) { readFile = f }(readFile)
	const meminfo = "MemTotal:       24683656 kB\nMemFree:        1000 kB\nMemAvailable:   2000000 kB\n"
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
		from  string
	}{
		{"cgroup v2", map[string]string{"/sys/fs/cgroup/memory.max": "536870912\n", "/proc/meminfo": meminfo}, 512 << 20, "/sys/fs/cgroup/memory.max"},
		{"cgroup v2 unlimited", map[string]string{"/sys/fs/cgroup/memory.max": "max\n", "/proc/meminfo": meminfo}, 2000000 << 10, "/proc/meminfo MemAvailable"},
		{"cgroup v1", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30, "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{"cgroup v1 unlimited", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n", "/proc/meminfo": meminfo}, 2000000 << 10, "/proc/meminfo MemAvailable"},
		{"nothing", map[string]string{}, fallbackMemory, "fallback"},
		// The process's own cgroup (/proc/self/cgroup), not the root:
		// a systemd unit's MemoryMax=, a limit nested in a container.
		{"cgroup v2, own cgroup", map[string]string{
			"/proc/self/cgroup":                                     "0::/system.slice/sluice.service\n",
			"/sys/fs/cgroup/memory.max":                             "max\n",
			"/sys/fs/cgroup/system.slice/memory.max":                "max\n",
			"/sys/fs/cgroup/system.slice/sluice.service/memory.max": "268435456\n",
			"/proc/meminfo":                                         meminfo,
		}, 256 << 20, "/sys/fs/cgroup/system.slice/sluice.service/memory.max"},
		{"cgroup v2, an ancestor's smaller limit", map[string]string{
			"/proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"/sys/fs/cgroup/kubepods/pod1/memory.max":    "134217728\n",
			"/sys/fs/cgroup/kubepods/pod1/c1/memory.max": "268435456\n",
			"/sys/fs/cgroup/kubepods/memory.max":         "max\n",
		}, 128 << 20, "/sys/fs/cgroup/kubepods/pod1/memory.max"},
		{"cgroup v1, own cgroup", map[string]string{
			"/proc/self/cgroup":                                           "5:cpu,cpuacct:/x\n4:memory:/process_api/abc\n0::/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes":                 "9223372036854771712\n",
			"/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "805306368\n",
		}, 768 << 20, "/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes"},
	} {
		readFile = func(name string) ([]byte, error) {
			if v, ok := c.files[name]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
		got, from := availableMemory()
		if got != c.want || from != c.from {
			t.Errorf("%s: %d from %q, want %d from %q", c.name, got, from, c.want, c.from)
		}
		if keys, want := defaultMaxKeys(), int(max(c.want/memoryShare/bytesPerKey, minKeys)); keys != want {
			t.Errorf("%s: defaultMaxKeys() = %d, want %d", c.name, keys, want)
		}
	}
	readFile = func(string) ([]byte, error) { return []byte("64000000"), nil } // a 64 MB container
	if got := defaultMaxKeys(); got != 125000 {
		t.Errorf("64 MB: %d keys, want 64e6/4/128 = 125000", got)
	}
	readFile = func(string) ([]byte, error) { return nil, errors.New("no") }
	if got := defaultMaxKeys(); got != int(fallbackMemory/memoryShare/bytesPerKey) {
		t.Errorf("no information: %d keys", got)
	}
}

// TestServeMaxKeysDefault: with default flags serve's memory store is
// bounded by defaultMaxKeys, and says so in /metrics.
func TestServeMaxKeysDefault(t *testing.T) {
	// In a container limited to 64 MB (MemAvailable moves too much to
	// compare with).
	defer func(f func(string) ([]byte, error)) { readFile = f }(readFile)
	readFile = func(name string) ([]byte, error) {
		if name == "/sys/fs/cgroup/memory.max" {
			return []byte("64000000\n"), nil
		}
		return nil, fs.ErrNotExist
	}
	r := startServe(t, serveOptions{})
	if got := metricSum(t, r.httpAddr, "sluice_store_max_keys"); got != 125000 {
		t.Fatalf("sluice_store_max_keys %v, want 64e6/4/128 = 125000", got)
	}
}

// TestServeEvictionsCounted: past its key budget the memory store evicts,
// and /metrics counts the evictions of keys that still limited someone.
func TestServeEvictionsCounted(t *testing.T) {
	dir := t.TempDir()
	cfg := "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 10}\n"
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const budget = 1000
	r := startServe(t, serveOptions{configDir: dir, maxKeys: budget})
	client, _ := rlsClient(t, r.grpcAddr)
	for i := range 3 * budget {
		if _, err := client.ShouldRateLimit(context.Background(), rlsRequest("d", "user", fmt.Sprint("u", i))); err != nil {
			t.Fatal(err)
		}
	}
	keys := metricSum(t, r.httpAddr, "sluice_store_keys")
	forced := metricSum(t, r.httpAddr, `sluice_store_evictions_total{reason="forced"}`)
	if keys > budget || keys < budget/2 || forced < 3*budget-keys {
		t.Fatalf("after %d distinct keys under a budget of %d: %v keys, %v forced evictions; want at most %d keys and the rest counted", 3*budget, budget, keys, forced, budget)
	}
	if m := metricSum(t, r.httpAddr, "sluice_store_max_keys"); m != budget {
		t.Fatalf("sluice_store_max_keys %v, want %d", m, budget)
	}
}

// TestServeFallbackEvictionsCounted: on a Redis store with a key budget,
// Redis dies and the rule (failure_mode local, the default) decides on the
// local fallback store, which gets more distinct keys than the budget. The
// fallback is bounded as the memory store is (sluice help serve,
// --max-keys), and /metrics shows it as README (Memory) says:
// sluice_store_max_keys its budget, sluice_store_keys its fill, and
// sluice_store_evictions_total{reason="forced"} what it forgave.
func TestServeFallbackEvictionsCounted(t *testing.T) {
	redis := sluicetest.StartRedisServer(t)
	dir := t.TempDir()
	cfg := "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 10}\n"
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const budget = 1000
	r := startServe(t, serveOptions{configDir: dir, storeURL: "redis://" + redis.Addr, maxKeys: budget})
	client, _ := rlsClient(t, r.grpcAddr)
	if _, err := client.ShouldRateLimit(context.Background(), rlsRequest("d", "user", "before")); err != nil {
		t.Fatal(err)
	}
	if k := metricSum(t, r.httpAddr, "sluice_store_keys"); k != 0 {
		t.Fatalf("Redis up: sluice_store_keys %v, want 0 (the fallback holds nothing)", k)
	}
	redis.Kill()
	for i := range 3 * budget {
		if _, err := client.ShouldRateLimit(context.Background(), rlsRequest("d", "user", fmt.Sprint("u", i))); err != nil {
			t.Fatal(err)
		}
	}
	local := metricSum(t, r.httpAddr, `sluice_decisions_total{domain="d",policy="d.user",result="failed_local"}`)
	if local != 3*budget {
		t.Fatalf("Redis down: %v requests decided by the local share, want %d", local, 3*budget)
	}
	if m := metricSum(t, r.httpAddr, "sluice_store_max_keys"); m != budget {
		t.Errorf("sluice_store_max_keys %v, want the fallback's budget %d", m, budget)
	}
	keys := metricSum(t, r.httpAddr, "sluice_store_keys")
	forced := metricSum(t, r.httpAddr, `sluice_store_evictions_total{reason="forced"}`)
	if keys == 0 || keys > budget || forced < 3*budget-keys {
		t.Errorf("%d distinct keys decided locally under a budget of %d: sluice_store_keys %v, forced evictions %v; want the fill shown (at most the budget) and the rest counted", 3*budget, budget, keys, forced)
	}
}
