// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http/httptest"
	"strings"
)

// openapiToken is the admin token of the OpenAPI exchanges' servers (all
// but "notoken").
const openapiToken = "0123456789abcdef-openapi"

// quotaExchanges are the exchanges of the limits API and GET /v1/usage
// (limits.go, usage.go, openapi/quota.yaml).
func quotaExchanges() []exchange {
	auth := map[string]string{"Authorization": "Bearer " + openapiToken}
	authJSON := map[string]string{"Authorization": "Bearer " + openapiToken, "Content-Type": "application/json"}
	timeout := map[string]string{"Authorization": "Bearer " + openapiToken, "Content-Type": "application/json", TimeoutHeader: "50ms"}
	set := `{"requests_per_unit":50,"unit":"minute","algorithm":"gcra","burst":80}`
	one := "/v1/limits/rides/tenant=acme"
	put := func(s *Server) func() {
		r := exchange{method: "PUT", path: "/v1/limits/rides/tenant=old", body: set, header: authJSON}.request()
		s.Handler().ServeHTTP(httptest.NewRecorder(), r)
		return func() {}
	}
	return []exchange{
		// GET /v1/limits/{domain}
		{name: "limits list", method: "GET", path: "/v1/limits/rides", header: auth, before: put, want: 200, shows: []string{`"applied":true`, `"set_by":"ops"`}},
		{name: "limits list bad Sluice-Timeout", method: "GET", path: "/v1/limits/rides", header: map[string]string{"Authorization": "Bearer " + openapiToken, TimeoutHeader: "soon"}, want: 400, invalid: true},
		{name: "limits list without a token", method: "GET", path: "/v1/limits/rides", want: 401},
		{name: "limits list, API off", on: "notoken", method: "GET", path: "/v1/limits/rides", header: auth, want: 403},
		{name: "limits list, store failed", on: "dead", method: "GET", path: "/v1/limits/rides", header: auth, want: 502},
		{name: "limits list without configuration", on: "empty", method: "GET", path: "/v1/limits/rides", header: auth, want: 503},
		{name: "limits list timeout passed", on: "stallquota", method: "GET", path: "/v1/limits/rides", header: timeout, want: 504},

		// PUT /v1/limits/{domain}/{descriptor}
		{name: "limit set", method: "PUT", path: one, body: set, header: authJSON, want: 200, shows: []string{`"effective":{"requests_per_unit":50`}},
		{name: "limit set, bad limit", method: "PUT", path: one, body: `{"requests_per_unit":0}`, header: authJSON, want: 400, invalid: true},
		{name: "limit set without a token", method: "PUT", path: one, body: set, want: 401},
		{name: "limit set, API off", on: "notoken", method: "PUT", path: one, body: set, header: authJSON, want: 403},
		{name: "limit set, not overridable", method: "PUT", path: "/v1/limits/rides/rider=r1", body: set, header: authJSON, want: 404},
		{name: "limit set too large", method: "PUT", path: one, body: `{"requests_per_unit":1,"unit":"` + strings.Repeat("x", maxBody) + `"}`, header: authJSON, want: 413, invalid: true},
		{name: "limit set text/plain", method: "PUT", path: one, body: set, header: map[string]string{"Authorization": "Bearer " + openapiToken, "Content-Type": "text/plain"}, want: 415, invalid: true},
		{name: "limit set, store failed", on: "dead", method: "PUT", path: one, body: set, header: authJSON, want: 502},
		{name: "limit set without configuration", on: "empty", method: "PUT", path: one, body: set, header: authJSON, want: 503},
		{name: "limit set timeout passed", on: "stallquota", method: "PUT", path: one, body: set, header: timeout, want: 504},
		{name: "limit set, memory full", on: "full", method: "PUT", path: one, body: set, header: authJSON, want: 507},

		// GET /v1/limits/{domain}/{descriptor}
		{name: "limit get", method: "GET", path: "/v1/limits/rides/tenant=old", header: auth, before: put, want: 200, shows: []string{`"default":{"requests_per_unit":5`}},
		{name: "limit get, bad descriptor", method: "GET", path: "/v1/limits/rides/tenant", header: auth, want: 400},
		{name: "limit get without a token", method: "GET", path: one, want: 401},
		{name: "limit get, API off", on: "notoken", method: "GET", path: one, header: auth, want: 403},
		{name: "limit get, no rule", method: "GET", path: "/v1/limits/rides/nothing=x", header: auth, want: 404},
		{name: "limit get, store failed", on: "dead", method: "GET", path: one, header: auth, want: 502},
		{name: "limit get without configuration", on: "empty", method: "GET", path: one, header: auth, want: 503},
		{name: "limit get timeout passed", on: "stallquota", method: "GET", path: one, header: timeout, want: 504},

		// DELETE /v1/limits/{domain}/{descriptor}
		{name: "limit delete", method: "DELETE", path: "/v1/limits/rides/tenant=old", header: auth, before: put, want: 200, shows: []string{`"override":null`, `"before":{`}},
		{name: "limit delete, bad descriptor", method: "DELETE", path: "/v1/limits/rides/=x", header: auth, want: 400},
		{name: "limit delete without a token", method: "DELETE", path: one, want: 401},
		{name: "limit delete, API off", on: "notoken", method: "DELETE", path: one, header: auth, want: 403},
		{name: "limit delete, none", method: "DELETE", path: "/v1/limits/rides/tenant=nobody", header: auth, want: 404},
		{name: "limit delete, store failed", on: "dead", method: "DELETE", path: one, header: auth, want: 502},
		{name: "limit delete without configuration", on: "empty", method: "DELETE", path: one, header: auth, want: 503},
		{name: "limit delete timeout passed", on: "stallquota", method: "DELETE", path: one, header: timeout, want: 504},

		// GET /v1/usage
		{name: "usage", method: "GET", path: "/v1/usage?domain=rides&rider=r1", want: 200, shows: []string{`"full_in":`, `"debt":0`}},
		{name: "usage, a window", method: "GET", path: "/v1/usage?domain=rides&tenant=w1", want: 200, shows: []string{`"period_start":`}},
		{name: "usage without domain", method: "GET", path: "/v1/usage?rider=r1", want: 400, invalid: true},
		{name: "usage no rule", method: "GET", path: "/v1/usage?domain=rides&nothing=x", want: 404},
		{name: "usage without configuration", on: "empty", method: "GET", path: "/v1/usage?domain=rides&rider=r1", want: 503},
		{name: "usage timeout passed", on: "stall", method: "GET", path: "/v1/usage?domain=rides&rider=r1", header: map[string]string{TimeoutHeader: "50ms"}, want: 504},
	}
}
