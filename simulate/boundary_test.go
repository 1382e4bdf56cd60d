// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The boundary attack's picture zooms on the window's edge, marks it, and
// says how much got through within one period.
func TestBoundaryAttackIsDrawn(t *testing.T) {
	var reqs []Request
	for _, at := range []time.Duration{59 * time.Second, 60 * time.Second} {
		for range 100 {
			reqs = append(reqs, Request{At: at, Key: "partner", Cost: 1})
		}
	}
	reqs = append(reqs, Request{At: 90 * time.Second, Key: "partner", Cost: 1}) // out of view
	for _, c := range []struct {
		alg      sluice.Algorithm
		densest  int64
		boundary bool
	}{
		{sluice.FixedWindow, 200, true},
		// The weighted count lets one more in at 90 s: 101 within (30s, 90s].
		{sluice.SlidingWindow, 101, true},
		{sluice.SlidingLog, 100, false},
	} {
		p := sluice.Policy{Algorithm: c.alg, Limit: 100, Period: time.Minute}
		r, err := Run(context.Background(), p, reqs, Zoom(50*time.Second, 70*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if r.Start != 50*time.Second || r.End != 70*time.Second || len(r.Steps) != 201 {
			t.Fatalf("%s: start %v end %v steps %d", c.alg, r.Start, r.End, len(r.Steps))
		}
		if r.Samples[0].At != 50*time.Second || r.Samples[len(r.Samples)-1].At != 70*time.Second {
			t.Errorf("%s: samples from %v to %v, want the zoomed span", c.alg, r.Samples[0].At, r.Samples[len(r.Samples)-1].At)
		}
		if units, _, _ := r.Densest(); units != c.densest {
			t.Errorf("%s: densest %d, want %d", c.alg, units, c.densest)
		}
		var b strings.Builder
		if err := r.WriteSVG(&b, "boundary"); err != nil {
			t.Fatal(err)
		}
		svg := b.String()
		// 60 s is the middle of 50..70 s: x = 70 + 770/2.
		hasBoundary := strings.Contains(svg, `<line class="boundary" stroke="#c62828" stroke-dasharray="6 4" x1="455.0"`) && strings.Count(svg, `<line class="boundary"`) == 1
		if hasBoundary != c.boundary {
			t.Errorf("%s: window boundary drawn %v, want %v", c.alg, hasBoundary, c.boundary)
		}
		if want := "most admitted within one 1m0s: " + map[int64]string{200: "200 (59s to 60s)", 101: "101 (59s to 90s)", 100: "100 (59s to 59s)"}[c.densest] + ", limit 100"; !strings.Contains(svg, want) {
			t.Errorf("%s: no %q", c.alg, want)
		}
		if strings.Contains(svg, `data-t="90"`) || strings.Count(svg, `class="req `) != 200 {
			t.Errorf("%s: %d requests drawn, want the 200 in view", c.alg, strings.Count(svg, `class="req `))
		}
		if !strings.Contains(svg, `<text x="70.0" y="362" text-anchor="middle" fill="#222">50s</text>`) {
			t.Errorf("%s: the time axis does not start at 50s", c.alg)
		}
	}
	if _, err := Run(context.Background(), sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}, reqs, Zoom(2*time.Second, time.Second)); err == nil {
		t.Error("zoom to before from: no error")
	}
}
