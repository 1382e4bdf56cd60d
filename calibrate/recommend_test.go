// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// fiftyClients is ten minutes of 50 clients: 49 poll once every 5 s (0.2/s,
// the median), and one opens the app every minute with 20 calls at once.
func fiftyClients() string {
	var b strings.Builder
	for ms := int64(0); ms < 600_000; ms += 100 {
		if ms%60_000 == 0 {
			for range 20 {
				fmt.Fprintf(&b, "%d.%03d opener\n", ms/1000, ms%1000)
			}
		}
		if i := ms / 100 % 50; i < 49 {
			fmt.Fprintf(&b, "%d.%03d poller%02d\n", ms/1000, ms%1000, i)
		}
	}
	return b.String()
}

// A bucket's recommendation is a sustained rate (what the keys need over a
// minute) and the burst that rate needs, not the peak second as the rate
// (20/s here, for clients that average a fraction of one per second).
func TestBucketRecommendsSustainedRateThenBurst(t *testing.T) {
	rep, err := Calibrate(context.Background(), source(fiftyClients(), Format{}), Config{Algorithm: sluice.TokenBucket})
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Policy
	if p.Limit != 1 || p.Burst != 20 {
		t.Errorf("recommendation %v, want rate 1/1s (the opener's 20 a minute, rounded up) and burst 20 (its salvo)", p)
	}
	if rep.Replay.Refused != 0 {
		t.Errorf("refused %d, want 0 (every key kept)", rep.Replay.Refused)
	}
	var b strings.Builder
	rep.WriteText(&b)
	for _, want := range []string{
		"rate 1 per 1s: what 50 of 50 keys need over their busiest 1m0s (at most 20 units), rounded up",
		"burst 20: the most those keys sent at once above that rate",
		"note: with 50 keys, keeping 99.9% of them means keeping every key: the recommendation fits the busiest one; to leave the busiest n keys limited, use --keep (K-n)/K (98% leaves the busiest one limited)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report has no line %q:\n%s", want, b.String())
		}
	}
	// The rate window is a knob: over 10 s the rate covers the salvo.
	rep, err = Calibrate(context.Background(), source(fiftyClients(), Format{}), Config{Algorithm: sluice.TokenBucket, RateWindow: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Policy.Limit != 2 {
		t.Errorf("rate window 10s: %v, want rate 2/1s (20 in 10 s)", rep.Policy)
	}
	if _, err := Calibrate(context.Background(), source(fiftyClients(), Format{}), Config{Algorithm: sluice.TokenBucket, Period: time.Minute, RateWindow: time.Second}); err == nil {
		t.Error("a rate window shorter than the period: no error")
	}
}

// The --keep suggested for "all but the busiest" keeps exactly K−1 keys,
// and is as round as that allows.
func TestKeepFor(t *testing.T) {
	for k, want := range map[int]string{2: "50%", 3: "66%", 7: "85%", 50: "98%", 1000: "99.9%", 1001: "99.9%", 3000: "99.96%"} {
		got := keepFor(k)
		if got != want {
			t.Errorf("keepFor(%d) = %s, want %s", k, got, want)
		}
		share, err := ParseShare(got)
		if err != nil {
			t.Fatal(err)
		}
		if m := mustKeep(share, k); m != int64(k-1) {
			t.Errorf("keepFor(%d) = %s keeps %d keys, want %d", k, got, m, k-1)
		}
	}
}

func TestResolution(t *testing.T) {
	for _, c := range []struct {
		trace  string
		period time.Duration
		res    time.Duration
		note   bool
	}{
		{"0 a\n1 a\n3 b\n", time.Second, time.Second, true},
		{"0 a\n1 a\n3 b\n", 10 * time.Second, time.Second, false},
		{"0 a\n60 a\n", time.Second, time.Minute, true},
		{"0 a\n0.25 a\n", time.Second, 10 * time.Millisecond, false},
		{"0 a\n0 b\n", time.Second, 0, false},
	} {
		rep, err := Calibrate(context.Background(), source(c.trace, Format{}), Config{Algorithm: sluice.FixedWindow, Period: c.period})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		rep.WriteText(&b)
		note := strings.Contains(b.String(), "look simultaneous")
		if rep.Resolution != c.res || note != c.note {
			t.Errorf("%q at period %v: resolution %v, note %v; want %v, %v\n%s", c.trace, c.period, rep.Resolution, note, c.res, c.note, b.String())
		}
	}
}
