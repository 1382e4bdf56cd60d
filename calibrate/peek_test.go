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
