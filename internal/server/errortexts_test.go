// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestErrorTextsNameTheField: a 400 names the field that is wrong where the
// caller wrote it. A top-level hits_addend below 0 was reported as the
// first descriptor's ("descriptors[0]: hits_addend -2"), and a limit the
// limits API refused named an empty policy (`policy "": burst 10`) rather
// than the rule the limit was for.
func TestErrorTextsNameTheField(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": tenantsYAML(), "rides.yaml": ridesYAML}, WithAdminTokens(AdminToken{Name: "ops", Token: testToken}))
	for _, c := range []struct {
		method, path, token, body, want string
	}{
		{"POST", "/v1/check", "-", `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"x"}]}],"hits_addend":-2}`,
			"hits_addend -2: must be >= 0"},
		{"POST", "/v1/charge", "-", `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"x"}]},{"entries":[{"key":"city","value":"y"}]}],"hits_addend":-2}`,
			"hits_addend -2: must be >= 0"},
		// A descriptor's own cost is still named by its index.
		{"POST", "/v1/check", "-", `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"x"}]},{"entries":[{"key":"city","value":"y"}],"hits_addend":-1}]}`,
			"descriptors[1]: hits_addend -1: must be >= 0"},
		{"PUT", "/v1/limits/api/alg=fixed-window/tenant=acme", testToken, `{"requests_per_unit":5,"burst":10}`,
			"body: limit for rule api.alg_fixed-window.tenant: burst 10: fixed-window has no burst (leave it 0)"},
		{"PUT", "/v1/limits/api/alg=gcra/tenant=acme", testToken, `{"requests_per_unit":5,"period":"1h","burst":-1}`,
			"body: limit for rule api.alg_gcra.tenant: burst -1: must be between 1 and"},
	} {
		code, body := h.do(t, c.method, c.path, c.token, c.body)
		var e struct{ Error string }
		json.Unmarshal([]byte(body), &e)
		if code != http.StatusBadRequest || len(e.Error) < len(c.want) || e.Error[:len(c.want)] != c.want {
			t.Errorf("%s %s %s: %d %s; want 400 starting %q", c.method, c.path, c.body, code, body, c.want)
		}
	}
}
