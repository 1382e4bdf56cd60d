// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calibrate"
)

// TestShadowRuleMatchesCalibration is the dark-launch loop: calibrate a
// policy from a trace, write it as a shadow rule, serve it, send the same
// traffic on the same clock, and the rule's would-be refusals are exactly
// the ones calibrate's replay reported.
func TestShadowRuleMatchesCalibration(t *testing.T) {
	var trace strings.Builder
	for i := range 400 {
		key := fmt.Sprintf("u%d", i%7)
		if i%3 == 0 {
			key = "u0" // one busy key
		}
		fmt.Fprintf(&trace, "%d.%03d %s\n", i/40, (i%40)*25, key)
	}
	src := func() (calibrate.Reader, io.Closer, error) {
		r, err := calibrate.NewReader(strings.NewReader(trace.String()), calibrate.Format{})
		return r, io.NopCloser(nil), err
	}
	rep, err := calibrate.Calibrate(context.Background(), src, calibrate.Config{Algorithm: sluice.TokenBucket, Keep: 800_000_000})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replay.Refused == 0 {
		t.Fatalf("calibration at 80%% refused nothing; the test needs refusals: %v", rep.Policy)
	}
	var yaml bytes.Buffer
	if err := calibrate.WriteYAML(&yaml, rep.Policy, calibrate.Rule{Domain: "api", Key: "user", Shadow: true}); err != nil {
		t.Fatal(err)
	}
	h := start(t, map[string]string{"calibrated.yaml": yaml.String()})
	r, _ := calibrate.NewReader(strings.NewReader(trace.String()), calibrate.Format{})
	for {
		q, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		h.clock.Set(time.Unix(0, q.At))
		if st := h.should(t, "api", desc("user", q.Key)); codesOf(st) != "OK: OK" {
			t.Fatalf("a shadow rule refused: %s", codesOf(st))
		}
	}
	ri := ruleNamed(t, h.rules(t), "api.user")
	if !ri.Shadow || ri.ShadowRefused != rep.Replay.Refused || ri.Refused != 0 {
		t.Errorf("shadow rule: %d would-be refusals, %d refusals; calibrate's replay of %v refused %d", ri.ShadowRefused, ri.Refused, rep.Policy, rep.Replay.Refused)
	}
	if len(ri.NearLimit) == 0 || ri.NearLimit[0].Key != "user="+rep.Replay.Top[0].Key {
		t.Errorf("nearest key %+v, want user=%s (refused most)", ri.NearLimit, rep.Replay.Top[0].Key)
	}
}
