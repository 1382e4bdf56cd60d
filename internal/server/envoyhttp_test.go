// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEnvoyHTTPEndpoints: a fleet's manifests probe envoyproxy/ratelimit's
// HTTP port at GET /healthcheck, and services that are not behind Envoy
// ask POST /json with a RateLimitRequest body. Its README ("HTTP Port"):
// /healthcheck "return[s] a 200 if this service is healthy"; /json "will
// return an http 200 if this request is allowed ... or 429 if one or more
// ratelimits were exceeded". sluice answered both 404 (a liveness probe
// killed every replica; a /json client got no decision). The answer is
// the RLS response in protobuf's JSON, as there.
func TestEnvoyHTTPEndpoints(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": "domain: dummy\ndescriptors:\n  - key: one_per_day\n    rate_limit: {unit: day, requests_per_unit: 1}\n"})
	resp, err := http.Get(h.http.URL + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthcheck: %s; envoyproxy/ratelimit answers 200 while healthy", resp.Status)
	}
	body := `{"domain":"dummy","descriptors":[{"entries":[{"key":"one_per_day","value":"something"}]}]}`
	for i, want := range []struct {
		code    int
		overall string
	}{{http.StatusOK, "OK"}, {http.StatusTooManyRequests, "OVER_LIMIT"}} {
		code, s := h.post(t, "/json", body)
		var r struct {
			OverallCode string `json:"overallCode"`
			Statuses    []struct {
				Code         string `json:"code"`
				CurrentLimit struct {
					RequestsPerUnit int    `json:"requestsPerUnit"`
					Unit            string `json:"unit"`
				} `json:"currentLimit"`
				DurationUntilReset string `json:"durationUntilReset"`
			} `json:"statuses"`
		}
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("POST /json, request %d: %d %s: %v", i, code, s, err)
		}
		if code != want.code || r.OverallCode != want.overall || len(r.Statuses) != 1 || r.Statuses[0].Code != want.overall ||
			r.Statuses[0].CurrentLimit.RequestsPerUnit != 1 || r.Statuses[0].CurrentLimit.Unit != "DAY" || r.Statuses[0].DurationUntilReset != "86400s" {
			t.Errorf("POST /json, request %d: %d %s; envoyproxy/ratelimit answers %d, overallCode %s, the status of the day's limit", i, code, s, want.code, want.overall)
		}
	}
	// The decision is counted under api="http", and the stopping service
	// is unhealthy, as envoyproxy/ratelimit's after SIGTERM.
	if m := h.get(t, "/metrics"); !strings.Contains(m, `sluice_decision_duration_seconds_count{api="http"} 2`) {
		t.Error(`/json's decisions are not counted under api="http"`)
	}
	h.srv.SetStopping()
	resp, err = http.Get(h.http.URL + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("GET /healthcheck while stopping: %s; want 500, as envoyproxy/ratelimit's after SIGTERM", resp.Status)
	}
}

// TestEnvoyJSONBounds: /json refuses a request over the bounds RLS has
// (MaxDescriptors descriptors, config.MaxDepth entries each) before it
// decodes it, naming the field and the count, as over gRPC.
func TestEnvoyJSONBounds(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n"})
	many := func(n int, elem string) string { return strings.TrimSuffix(strings.Repeat(elem+",", n), ",") }
	entry := `{"key":"k","value":"v"}`
	for _, tc := range []struct{ body, want string }{
		{`{"domain":"d","descriptors":[` + many(MaxDescriptors+1, `{}`) + `]}`, descriptorsBound(MaxDescriptors + 1)},
		{`{"domain":"d","descriptors":[` + many(300000, `{}`) + `]}`, descriptorsBound(300000)},
		{`{"hitsAddend":1,"descriptors":[{"entries":[` + entry + `]},{"limit":{"unit":"DAY"},"entries":[` + many(65, entry) + `]}],"domain":"d"}`, entriesBound(1, 65)},
	} {
		code, s := h.post(t, "/json", tc.body)
		if code != http.StatusBadRequest || !strings.Contains(s, tc.want) {
			t.Errorf("POST /json of %d bytes: %d %.200s; want 400 %s", len(tc.body), code, s, tc.want)
		}
	}
	for _, b := range []string{
		`{"domain":"d","descriptors":[` + many(MaxDescriptors, `{"entries":[`+many(64, entry)+`]}`) + `]}`,
		`{"domain":"d","descriptors":null,"hits_addend":1}`,
		`[]`, `{"descriptors":{"entries":[]}}`, `{"descriptors":[1,[2]]}`,
	} {
		if msg := jsonOverBounds([]byte(b)); msg != "" {
			t.Errorf("jsonOverBounds(%.60s): %s; want none (within the bounds, or left to the decoder)", b, msg)
		}
	}
}

// envoyExchanges are the OpenAPI exchanges of envoyproxy/ratelimit's
// endpoints (openapi/envoy.yaml).
func envoyExchanges() []exchange {
	one := `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"j1"}]}]}`
	crossSite := map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}
	stopping := func(s *Server) func() {
		s.stopping.Store(true)
		return func() { s.stopping.Store(false) }
	}
	return []exchange{
		{name: "healthcheck", method: "GET", path: "/healthcheck", want: 200},
		{name: "healthcheck, store unreachable", on: "dead", method: "GET", path: "/healthcheck", want: 200},
		{name: "healthcheck without configuration", on: "empty", method: "GET", path: "/healthcheck", want: 500},
		{name: "healthcheck while stopping", method: "GET", path: "/healthcheck", before: stopping, want: 500, shows: []string{"shutting down"}},
		{name: "json allowed", method: "POST", path: "/json", body: one, want: 200, shows: []string{`"overallCode":"OK"`, `"durationUntilReset":"1s"`}},
		{name: "json with metadata and both field forms", method: "POST", path: "/json", want: 200,
			body:  `{"domain":"rides","hits_addend":1,"descriptors":[{"entries":[{"key":"backend","value":"j1"}],"hitsAddend":1},{"entries":[{"key":"nothing"}]}]}`,
			shows: []string{`"dynamicMetadata":`, `"owner":"team-a"`}},
		{name: "json over a limit", method: "POST", path: "/json", want: 429,
			body:  `{"domain":"rides","descriptors":[{"entries":[{"key":"blocked","value":"b"}]},{"entries":[{"key":"rider","value":"j2"}]}]}`,
			shows: []string{`"overallCode":"OVER_LIMIT"`}},
		{name: "json limit override", method: "POST", path: "/json", want: 429,
			body:  `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"j3"}],"limit":{"requestsPerUnit":0,"unit":"MINUTE"}}]}`,
			shows: []string{`"overallCode":"OVER_LIMIT"`}},
		{name: "json no domain", method: "POST", path: "/json", body: `{"descriptors":[{"entries":[]}]}`, want: 400, invalid: true, shows: []string{"domain: must not be empty"}},
		{name: "json unknown field", method: "POST", path: "/json", body: `{"domain":"rides","descriptors":[{"entries":[]}],"colour":"red"}`, want: 400, invalid: true},
		{name: "json refund", method: "POST", path: "/json", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"j4"}],"isNegativeHits":true}]}`, want: 400, shows: []string{"is_negative_hits"}},
		{name: "json too many descriptors", method: "POST", path: "/json", body: `{"domain":"rides","descriptors":[` + strings.TrimSuffix(strings.Repeat(`{},`, MaxDescriptors+1), ",") + `]}`, want: 400, invalid: true},
		{name: "json too large", method: "POST", path: "/json", body: `{"domain":"` + strings.Repeat("x", maxBody) + `"}`, want: 413, invalid: true},
		{name: "json form type", method: "POST", path: "/json", body: one, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, want: 415, invalid: true, shows: []string{"curl: -H 'Content-Type: application/json'"}},
		{name: "json cross-site", method: "POST", path: "/json", body: one, header: crossSite, want: 403},
		{name: "json without configuration", on: "empty", method: "POST", path: "/json", body: one, want: 503},
		{name: "json timeout passed", on: "stall", method: "POST", path: "/json", body: one, header: map[string]string{"Content-Type": "application/json", TimeoutHeader: "50ms"}, want: 504},
		{name: "json by GET", method: "GET", path: "/json", want: 405},
	}
}

// TestHealthcheckAndReadyzAgree: /healthcheck is unhealthy exactly when
// /readyz is not ready.
func TestHealthcheckAndReadyzAgree(t *testing.T) {
	h := start(t, nil)
	get := func(path string) int {
		rec := httptest.NewRecorder()
		h.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code
	}
	if hc, rz := get("/healthcheck"), get("/readyz"); hc != 500 || rz != 503 {
		t.Errorf("no configuration: /healthcheck %d, /readyz %d; want 500 and 503", hc, rz)
	}
	writeFiles(t, h.dir, map[string]string{"d.yaml": "domain: d\n"})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	if hc, rz := get("/healthcheck"), get("/readyz"); hc != 200 || rz != 200 {
		t.Errorf("configured: /healthcheck %d, /readyz %d; want 200 and 200", hc, rz)
	}
}
