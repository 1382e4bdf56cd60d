// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOneNamePerRule (issue 22 item 15): a rule has one name, its title
// (config.Rule.Title: rate_limit.name when set, else its full key), in RLS's
// current_limit.name, the JSON API's name, the RateLimit headers, the
// metrics' policy label and GET /v1/rules. Before, RLS and JSON said
// "rider" (and nothing for a rule without a name) while the headers said
// "rides.rider".
func TestOneNamePerRule(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML}, WithResponseHeaders(false))
	for _, c := range []struct{ key, value, title, fullKey string }{
		{"rider", "r1", "rider", "rides.rider"},       // name: rider
		{"city", "paris", "rides.city", "rides.city"}, // no name
	} {
		resp := h.should(t, "rides", desc(c.key, c.value))
		if got := resp.Statuses[0].GetCurrentLimit().GetName(); got != c.title {
			t.Errorf("%s: RLS current_limit.name %q, want %q", c.key, got, c.title)
		}
		var policy string
		for _, hv := range resp.ResponseHeadersToAdd {
			if hv.Key == "RateLimit-Policy" {
				policy = hv.Value
			}
		}
		if !strings.HasPrefix(policy, `"`+c.title+`";`) {
			t.Errorf("%s: RateLimit-Policy %q, want it named %q", c.key, policy, c.title)
		}
		code, body := h.post(t, "/v1/check", `{"domain":"rides","descriptors":[{"entries":[{"key":"`+c.key+`","value":"`+c.value+`"}]}]}`)
		var jr CheckResponse
		if err := json.Unmarshal([]byte(body), &jr); err != nil || code != 200 {
			t.Fatalf("%s: /v1/check: %d %s (%v)", c.key, code, body, err)
		}
		if st := jr.Statuses[0]; st.Name != c.title || st.Rule != c.fullKey {
			t.Errorf("%s: JSON name %q rule %q, want name %q and rule (its address) %q", c.key, st.Name, st.Rule, c.title, c.fullKey)
		}
		if m := h.get(t, "/metrics"); !strings.Contains(m, `policy="`+c.title+`"`) {
			t.Errorf("%s: no metric has policy=%q", c.key, c.title)
		}
		if ri := ruleNamed(t, h.rules(t), c.fullKey); ri.Name != c.title {
			t.Errorf("%s: GET /v1/rules name %q, want %q", c.key, ri.Name, c.title)
		}
	}
}
