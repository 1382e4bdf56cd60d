// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestUsageReportsDebt: GET /v1/usage reports what the key owes beyond
// its limit: after a charge of 1500 on a 1000-a-minute fixed window, debt
// 500 (it answered 0: the field was never set).
func TestUsageReportsDebt(t *testing.T) {
	h := start(t, map[string]string{"llm.yaml": tokensYAML})
	code, body := h.do(t, "POST", "/v1/charge", "-",
		`{"domain":"llm","hits_addend":1500,"descriptors":[{"entries":[{"key":"plain","value":"acme"}]}]}`)
	if code != 200 {
		t.Fatalf("POST /v1/charge: %d %s", code, body)
	}
	u := h.usage(t, "domain=llm&plain=acme")
	if u.Debt != 500 || u.Remaining != 0 {
		t.Errorf("after charging 1500 of a limit of 1000: used %d, remaining %d, debt %d; want debt 500", u.Used, u.Remaining, u.Debt)
	}
}

// overriddenTenant starts a server with tenantsYAML (fixed-window tenants
// of 2 a minute, overridable) and gives tenant acme an override of 10 a
// minute.
func overriddenTenant(t *testing.T) *harness {
	t.Helper()
	h := start(t, map[string]string{"api.yaml": tenantsYAML()}, WithAdminTokens(AdminToken{Token: testToken}))
	if code, body := h.do(t, "PUT", "/v1/limits/api/alg=fixed-window/tenant=acme", testToken, `{"requests_per_unit":10}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	return h
}

const acmeEntries = `[{"entries":[{"key":"alg","value":"fixed-window"},{"key":"tenant","value":"acme"}]}]`

// TestChargeUsesOverride: POST /v1/charge charges the state a tenant's
// decisions read: under its override (limits API), not the rule's default
// (which no decision of the tenant reads), so a charge past the
// override's budget refuses the tenant's next checks.
func TestChargeUsesOverride(t *testing.T) {
	h := overriddenTenant(t)
	code, body := h.post(t, "/v1/charge", `{"domain":"api","hits_addend":50,"descriptors":`+acmeEntries+`}`)
	if code != 200 {
		t.Fatalf("charge: %d %s", code, body)
	}
	if got := admittedHTTP(t, h.http.URL, "api", 3, "alg", "fixed-window", "tenant", "acme"); got != 0 {
		t.Errorf("after a charge of 50 on an override of 10 a minute, %d of 3 checks were admitted in the same window; want 0 (the charge was recorded under the default, which no decision of acme reads)", got)
	}
	if u := h.usage(t, "domain=api&alg=fixed-window&tenant=acme"); u.Remaining != 0 {
		t.Errorf("usage after the charge: %+v; want remaining 0", u)
	}
}

// TestCommitUsesOverride: the same through /v1/reserve and /v1/commit:
// the reservation is decided under acme's override, and so is the commit's
// excess.
func TestCommitUsesOverride(t *testing.T) {
	h := overriddenTenant(t)
	code, body := h.post(t, "/v1/reserve", `{"domain":"api","hits_addend":1,"descriptors":`+acmeEntries+`}`)
	var r ReserveResponse
	if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil || r.ReservationID == "" {
		t.Fatalf("reserve: %d %s", code, body)
	}
	if code, body := h.post(t, "/v1/commit", fmt.Sprintf(`{"reservation_id":%q,"hits_addend":50}`, r.ReservationID)); code != 200 {
		t.Fatalf("commit: %d %s", code, body)
	}
	if got := admittedHTTP(t, h.http.URL, "api", 3, "alg", "fixed-window", "tenant", "acme"); got != 0 {
		t.Errorf("after committing 50 on an override of 10 a minute, %d of 3 checks were admitted in the same window; want 0", got)
	}
}

// TestChargeCountsCrossings: a tenant whose use reaches 80% and 100%
// through costs charged after the response (POST /v1/charge, or the commit
// of a reservation) counts both crossings, as a check would (only check
// counted them).
func TestChargeCountsCrossings(t *testing.T) {
	h := start(t, map[string]string{"llm.yaml": tokensYAML})
	code, body := h.post(t, "/v1/charge", `{"domain":"llm","hits_addend":1500,"descriptors":[{"entries":[{"key":"plain","value":"acme"}]}]}`)
	if code != 200 {
		t.Fatalf("charge: %d %s", code, body)
	}
	metrics := h.get(t, "/metrics")
	for _, th := range []string{"80", "100"} {
		if !strings.Contains(metrics, `sluice_usage_threshold_crossings_total{domain="llm",rule="llm.plain",threshold="`+th+`"} 1`) {
			t.Errorf("a charge took acme from 0 to 150%% of its budget: no crossing of %s%% counted", th)
		}
	}
}

// TestReloadKeepsCrossings: a crossing counted in a period is not counted
// again after a reload (here one that changed another domain's file: every
// reload forgot what was counted, and the tenant's next request counted
// its 80% crossing a second time).
func TestReloadKeepsCrossings(t *testing.T) {
	yaml := "domain: api\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"
	h := start(t, map[string]string{"api.yaml": yaml})
	metric := func() string {
		for _, l := range strings.Split(h.get(t, "/metrics"), "\n") {
			if strings.HasPrefix(l, `sluice_usage_threshold_crossings_total{domain="api",rule="api.tenant",threshold="80"}`) {
				return l[strings.LastIndexByte(l, ' ')+1:]
			}
		}
		return "0"
	}
	admittedHTTP(t, h.http.URL, "api", 8, "tenant", "a") // 80%
	if m := metric(); m != "1" {
		t.Fatalf("at 80%%: %s crossings, want 1", m)
	}
	// Another domain's file changes; api.yaml does not.
	writeFiles(t, h.dir, map[string]string{"other.yaml": "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	admittedHTTP(t, h.http.URL, "api", 1, "tenant", "a") // 90%, same window
	if m := metric(); m != "1" {
		t.Errorf("after an unrelated reload, the same key in the same window: %s crossings of 80%%, want 1", m)
	}
}
