// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/memstore"
)

// The default key budget of serve's memory stores (--max-keys auto):
//
//	keys = memoryShare × memory / bytesPerKey, at least minKeys
//
// where memory is the process's cgroup's memory limit (cgroup v2
// memory.max, or v1 memory.limit_in_bytes; cgroupLimit) when one is set, else MemAvailable from
// /proc/meminfo at start, else fallbackMemory. With Go's garbage collector
// letting the heap grow to twice the live data (GOGC=100), the keys then
// take at most half of that memory.
const (
	memoryShare = 4 // the keys' share of memory is 1/memoryShare
	// bytesPerKey is what memstore holds per key, measured at 1M keys of
	// 26 bytes on a per-day rule (heap in use after a GC, BENCHMARKS.md):
	// fixed-window 64.5, gcra 53.6, sliding-window 69.3, sliding-log 99.4
	// (with one entry in the log); rounded up to leave room for longer keys.
	// The service stores no key longer than 64 bytes (a longer one as a
	// 44-byte digest: storeKey in internal/server), and keys of 64 bytes
	// take 98 to 113 bytes (sliding-log 134 with one entry; its memory grows
	// with its log anyway).
	bytesPerKey    = 128
	minKeys        = 10_000
	fallbackMemory = 1 << 30 // when no limit and no /proc/meminfo
)

// readFile is os.ReadFile; tests replace it.
var readFile = os.ReadFile

// availableMemory returns the memory serve may use and where that figure
// came from.
func availableMemory() (n int64, source string) {
	if n, f := cgroupLimit(); n > 0 {
		return n, f
	}
	if b, err := readFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "MemAvailable:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 {
					return kb << 10, "/proc/meminfo MemAvailable"
				}
			}
		}
	}
	return fallbackMemory, "fallback"
}

// cgroupLimit returns the memory limit of the process's own cgroup, and
// the file it was read from, or 0 if none is set. The cgroup is the one
// /proc/self/cgroup names (cgroup v2's "0::" line, else v1's memory
// controller), not the root of the hierarchy: a systemd unit's MemoryMax=
// or a limit nested inside a container is set there. The limit in force is
// the smallest of the cgroup's and its ancestors' (a file that does not
// exist, as when the hierarchy is mounted at the cgroup itself, is
// skipped), so the root's applies too.
func cgroupLimit() (int64, string) {
	v2, v1 := "/", "/"
	if b, err := readFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(f) != 3 {
				continue
			}
			switch {
			case f[0] == "0" && f[1] == "":
				v2 = f[2]
			case slices.Contains(strings.Split(f[1], ","), "memory"):
				v1 = f[2]
			}
		}
	}
	for _, h := range []struct{ mount, file, cgroup string }{
		{"/sys/fs/cgroup", "memory.max", v2},
		{"/sys/fs/cgroup/memory", "memory.limit_in_bytes", v1},
	} {
		var limit int64
		var from string
		for dir := path.Clean("/" + h.cgroup); ; dir = path.Dir(dir) {
			f := path.Join(h.mount, dir, h.file)
			if n := readLimit(f); n > 0 && (limit == 0 || n < limit) {
				limit, from = n, f
			}
			if dir == "/" {
				break
			}
		}
		if limit > 0 {
			return limit, from
		}
	}
	return 0, ""
}

// readLimit reads a cgroup memory limit file: the limit, or 0 for none
// ("max" in v2, a huge number as v1's "unlimited", or no such file).
func readLimit(f string) int64 {
	b, err := readFile(f)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0
	}
	return n
}

// defaultMaxKeys is the key budget of --max-keys auto.
func defaultMaxKeys() int {
	mem, _ := availableMemory()
	return int(max(mem/memoryShare/bytesPerKey, minKeys))
}

// storeCollector exports a memory store's key count, bound and evictions:
// serve's in-process store, which is the memory store on --store memory and
// the local fallback store (failure_mode: local) on a Redis store. One
// process has one of them that holds keys (on the memory store the fallback
// is never used), so the series have no label to say which.
type storeCollector struct {
	store              *memstore.Store
	maxKeys            int
	keys, bound, evict *prometheus.Desc
}

func newStoreCollector(s *memstore.Store, maxKeys int) *storeCollector {
	return &storeCollector{
		store: s, maxKeys: maxKeys,
		keys:  prometheus.NewDesc("sluice_store_keys", "Keys the in-process store holds: the memory store, or with a Redis --store the local fallback store (failure_mode: local).", nil, nil),
		bound: prometheus.NewDesc("sluice_store_max_keys", "The in-process store's key budget (--max-keys; 0: no bound): the memory store's, or with a Redis --store the local fallback store's.", nil, nil),
		evict: prometheus.NewDesc("sluice_store_evictions_total", "Keys the in-process store (the memory store, or with a Redis --store the local fallback store) dropped to stay within --max-keys, by reason: expired (their state was already idle: nothing lost) or forced (their state still limited someone, who was forgiven: an exactness loss).", []string{"reason"}, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.keys
	ch <- c.bound
	ch <- c.evict
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.Stats()
	ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(st.Keys))
	ch <- prometheus.MustNewConstMetric(c.bound, prometheus.GaugeValue, float64(c.maxKeys))
	ch <- prometheus.MustNewConstMetric(c.evict, prometheus.CounterValue, float64(st.Evicted), "expired")
	ch <- prometheus.MustNewConstMetric(c.evict, prometheus.CounterValue, float64(st.ForcedEvictions), "forced")
}
