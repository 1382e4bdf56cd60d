// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay"
)

// TestZeroCostLineIsAPeek checks that a cost-0 line counts as the peek the
// models judge it to be: it takes nothing, but needs room for one unit. A
// key that sends 1 unit then peeks needs a limit (or burst) of 2, and the
// recommendation admits the peek.
func TestZeroCostLineIsAPeek(t *testing.T) {
	ctx := context.Background()
	jsonl := "{\"time\":0,\"key\":\"a\",\"tokens\":1}\n{\"time\":0,\"key\":\"a\",\"tokens\":0}\n"
	for _, in := range []struct {
		name string
		src  Source
	}{
		{"trace", source("0 a 1\n0 a 0\n", Format{})},
		{"jsonl", source(jsonl, Format{JSONL: true, TimeField: "time", KeyField: "key", CostField: "tokens"})},
	} {
		for _, alg := range sluice.Algorithms() {
			t.Run(in.name+"/"+string(alg), func(t *testing.T) {
				rep, err := Calibrate(ctx, in.src, Config{Algorithm: alg, Keep: Billion})
				if err != nil {
					t.Fatal(err)
				}
				got := rep.Policy.Limit
				if alg.IsBucket() {
					got = rep.Policy.Burst
				}
				if got != 2 || rep.Need.At[len(rep.Need.At)-1] != 2 {
					t.Errorf("%v, need %v: want a need and a parameter of 2 (1 unit, then a peek for 1 more)", rep.Policy, rep.Need.At)
				}
				if rep.Replay.Refused != 0 || rep.Units != 1 || rep.Requests != 2 {
					t.Errorf("refused %d, units %d, requests %d: want 0, 1, 2", rep.Replay.Refused, rep.Units, rep.Requests)
				}
			})
		}
	}
}

// TestPeeksKeepRecommendationExact is TestRecommendationIsExact's edge
// check on traffic where one line in four is a peek just after its key's
// request: at 100 % nothing is refused, and one unit less refuses some key.
func TestPeeksKeepRecommendationExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 1))
	var b strings.Builder
	at, key := int64(0), 0
	for i := 0; i < 3000; i++ {
		cost := 1 + rng.IntN(3)
		if rng.IntN(4) == 0 {
			cost = 0 // a peek right after the key's last request
		} else {
			at += rng.Int64N(int64(30 * time.Millisecond))
			key = rng.IntN(8)
		}
		fmt.Fprintf(&b, "%s k%d %d\n", replay.AppendSeconds(nil, time.Duration(at)), key, cost)
	}
	src := source(b.String(), Format{})
	ctx := context.Background()
	for _, alg := range sluice.Algorithms() {
		for _, period := range []time.Duration{time.Second, 3 * time.Second} {
			t.Run(fmt.Sprintf("%s/period=%v", alg, period), func(t *testing.T) {
				rep, err := Calibrate(ctx, src, Config{Algorithm: alg, Keep: Billion, Period: period})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Replay.Refused != 0 {
					t.Fatalf("%v refused %d requests at 100%%", rep.Policy, rep.Replay.Refused)
				}
				tighter := rep.Policy
				if alg.IsBucket() {
					tighter.Burst--
				} else {
					tighter.Limit--
				}
				if tighter.Limit < 1 || tighter.Algorithm.IsBucket() && tighter.Burst < 1 {
					return
				}
				out, err := Replay(ctx, src, tighter)
				if err != nil {
					t.Fatal(err)
				}
				if out.Refused == 0 {
					t.Fatalf("%v (one less than recommended) refused nothing: the recommendation is not the tightest", tighter)
				}
			})
		}
	}
}

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
