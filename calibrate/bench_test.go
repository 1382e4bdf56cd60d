// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay"
)

// benchTraffic is a million requests over an hour from 10 000 keys (a
// skewed mix), as a trace and as a JSON-lines log.
func benchTraffic(lines, keys int) (trace, jsonl []byte) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb, jb bytes.Buffer
	step := int64(time.Hour) / int64(lines)
	t := int64(1_767_225_600) * int64(time.Second) // 2026-01-01
	for range lines {
		t += rng.Int64N(2 * step)
		k := rng.IntN(keys)
		k = k * k / keys
		at := replay.AppendSeconds(nil, time.Duration(t))
		fmt.Fprintf(&tb, "%s user%d\n", at, k)
		fmt.Fprintf(&jb, `{"ts":"%s","user":"user%d","path":"/v1/trips","status":200}`+"\n", time.Unix(0, t).UTC().Format(time.RFC3339Nano), k)
	}
	return tb.Bytes(), jb.Bytes()
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCalibrate reports lines/s (wall) and CPU ns per line (user and
// system, all threads) for the whole of Calibrate: its three passes, the
// last the verifying replay, over a million lines.
func BenchmarkCalibrate(b *testing.B) {
	const lines = 1_000_000
	trace, jsonl := benchTraffic(lines, 10_000)
	for _, format := range []string{"trace", "jsonl"} {
		data, f := trace, Format{}
		if format == "jsonl" {
			data, f = jsonl, Format{JSONL: true, TimeField: "ts", KeyField: "user"}
		}
		src := func() (Reader, io.Closer, error) {
			r, err := NewReader(bytes.NewReader(data), f)
			return r, io.NopCloser(nil), err
		}
		for _, alg := range []sluice.Algorithm{sluice.TokenBucket, sluice.FixedWindow, sluice.SlidingLog} {
			b.Run(fmt.Sprintf("format=%s/alg=%s", format, alg), func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					if _, err := Calibrate(context.Background(), src, Config{Algorithm: alg}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
				// CPU time is steadier than wall time on a shared machine.
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(lines*b.N), "cpu-ns/line")
			})
		}
	}
}
