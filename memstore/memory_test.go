// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// bytesPerKey fills a new store with n distinct 16-byte keys under p and
// returns the growth of the heap in use (after a GC) divided by n.
func bytesPerKey(tb testing.TB, p sluice.Policy, n int) float64 {
	tb.Helper()
	return bytesPerKeyOfLen(tb, p, n, 16)
}

// bytesPerKeyOfLen is bytesPerKey with keys of length bytes (at least 16).
func bytesPerKeyOfLen(tb testing.TB, p sluice.Policy, n, length int) float64 {
	tb.Helper()
	clock := sluicetest.NewClock(time.Unix(0, 0))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(WithClock(clock), WithSweepInterval(0))
	ctx := context.Background()
	key := []byte("user-0000000000x" + strings.Repeat("x", length-16))
	for i := range n {
		binary.BigEndian.PutUint64(key[5:13], uint64(i))
		if _, err := s.Take(ctx, p, string(key), 1); err != nil {
			tb.Fatal(err)
		}
	}
	if s.Len() != n {
		tb.Fatalf("Len() = %d, want %d", s.Len(), n)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(after.HeapInuse-before.HeapInuse) / float64(n)
}

// TestMemoryPerKey: at most 48 bytes per key, all in, for the bucket kinds at
// a million keys of 16 bytes.
func TestMemoryPerKey(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 3, Period: time.Hour}
	if got := bytesPerKey(t, p, 1_000_000); got > 48 {
		t.Errorf("%.1f bytes per key, want at most 48", got)
	} else {
		t.Logf("%.1f bytes per key", got)
	}
}
