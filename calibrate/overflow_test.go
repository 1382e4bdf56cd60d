// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestTotalUnitsOverflowIsAnError checks that traffic whose total cost
// does not fit an int64 is refused at the line that passes it, not
// reported with a wrapped, negative Report.Units.
func TestTotalUnitsOverflowIsAnError(t *testing.T) {
	data := "0 a 4000000000000000000\n0 b 4000000000000000000\n0 c 4000000000000000000\n"
	for _, alg := range sluice.Algorithms() {
		rep, err := Calibrate(context.Background(), source(data, Format{}), Config{Algorithm: alg})
		want := "calibrate: line 3: the traffic's total cost passes 9223372036854775807 units"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			units := int64(0)
			if rep != nil {
				units = rep.Units
			}
			t.Errorf("%s: units %d, error %v; want an error starting %q", alg, units, err, want)
		}
	}
	// Up to the bound is counted (a 1 ns period keeps the burst column's
	// backlog within bounds too).
	data = "0 a 4611686018427387904\n1 b 4611686018427387903\n"
	rep, err := Calibrate(context.Background(), source(data, Format{}), Config{Algorithm: sluice.FixedWindow, Period: time.Nanosecond})
	if err != nil || rep.Units != 1<<63-1 {
		t.Errorf("units %v, error %v; want 9223372036854775807", rep, err)
	}
}

// TestBacklogErrorNamesTheRate checks the error for a key whose backlog
// passes what sluice can hold: it names the rate bursts are computed at
// (limit per period, which den·period/num overflowed computing), and for a
// window kind says it is the burst column, or that the limit itself
// cannot be held.
func TestBacklogErrorNamesTheRate(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		data string
		cfg  Config
		want string
	}{
		{"0 a 9223372036854775807\n", Config{Algorithm: sluice.TokenBucket, Limit: 1 << 62},
			`line 1: key "a": its backlog at rate 4611686018427387904/1s exceeds what sluice can hold`},
		{"0 a 9223372036854775807\n", Config{Algorithm: sluice.GCRA, Limit: 999_999_999_999, Period: time.Minute},
			`line 1: key "a": its backlog at rate 999999999999/1m0s exceeds what sluice can hold`},
		{"0 a 4611686018427387904\n", Config{Algorithm: sluice.SlidingLog},
			`line 1: key "a": the token-bucket burst it would need at the limit's rate, 4611686018427387904 per 1s (the report's burst column), exceeds what sluice can hold`},
		{"0 a 9223372036854775807\n", Config{Algorithm: sluice.FixedWindow},
			`the traffic needs a policy sluice cannot hold: sluice: policy "calibrated": limit 9223372036854775807: must be between 1 and 4611686018427387904`},
	} {
		_, err := Calibrate(ctx, source(c.data, Format{}), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v, want an error containing %q", c.cfg.Algorithm, c.data, err, c.want)
		}
	}
}
