// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// openapiYAML is the configuration the OpenAPI exchanges run under: a rule
// of each kind a status can tell.
const openapiYAML = `domain: rides
descriptors:
  - key: rider
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token-bucket, burst: 3, name: rider}
  - key: city
    value: atlantis
    rate_limit: {unlimited: true}
  - key: tester
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: queue
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky-bucket, burst: 5}
  - key: backend
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata:
      owner: team-a
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 5, overridable: true}
`

// loadOpenAPI serves GET /v1/openapi.json from a fresh server and loads and
// validates the document it answers.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	srv, err := New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	doc, err := openapi3.NewLoader().LoadFromData(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3: %v", err)
	}
	return doc
}

// docMethods are the methods an operation of the document may have.
var docMethods = []string{"GET", "PUT", "POST", "DELETE", "PATCH"}

// TestOpenAPIRoutes: every route registered on the API's mux is a path and
// method of the OpenAPI document, and every operation of the document is a
// route (a route added without its description fails here, and so does a
// description of a route that is gone).
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	var inDoc []string
	for p, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			inDoc = append(inDoc, m+" "+p)
		}
	}
	srv, err := New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	var inMux []string
	for _, p := range srv.mux().patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok || !slices.Contains(docMethods, method) {
			t.Errorf("route %q: register it with one method (GET, POST, ...), as the document has it", p)
			continue
		}
		// ServeMux's "/{$}" is the path "/" exactly; "{name...}" a wildcard.
		path = strings.TrimSuffix(path, "{$}")
		path = strings.ReplaceAll(path, "...}", "}")
		inMux = append(inMux, method+" "+path)
	}
	slices.Sort(inDoc)
	slices.Sort(inMux)
	for _, r := range inMux {
		if !slices.Contains(inDoc, r) {
			t.Errorf("route %s is not in the OpenAPI document (internal/server/openapi/*.yaml)", r)
		}
	}
	for _, r := range inDoc {
		if !slices.Contains(inMux, r) {
			t.Errorf("the OpenAPI document has %s, which the mux does not route", r)
		}
	}
}

// exchange is one real request to the HTTP API and what it must be
// answered.
type exchange struct {
	name string
	// on names the server that answers (openapiServers); default "rides".
	on           string
	method, path string
	body         string
	header       map[string]string // Content-Type defaults to application/json for a body
	want         int
	// invalid: the request itself does not match the document (and the
	// server refuses it).
	invalid bool
	// before runs before the request, and its result after it.
	before func(*Server) func()
	// shows are texts the answer's body must hold: what the exchange is
	// there to show the document.
	shows []string
	// probe: any answer the document describes will do (want is not
	// checked), and the request is not held to the document
	// (TestOpenAPIErrorPaths).
	probe bool
}

// reservedID names the reservation holdReservation opens.
const reservedID = "0123456789abcdef0123456789abcdef"

// heldDescriptor is the descriptor of the reservation holdReservation
// opens: 1 unit of rider r9.
var heldDescriptor = descriptor{entries: []config.Entry{{Key: "rider", Value: "r9"}}, hits: 1}

// holdReservation opens a reservation named reservedID (heldDescriptor),
// as edit leaves it, without taking the unit, for the commit exchanges.
func holdReservation(edit func(*reservation)) func(*Server) func() {
	return func(s *Server) func() {
		r := &reservation{domain: "rides", descs: []descriptor{heldDescriptor}, expires: s.now().Add(ReservationTTL)}
		if edit != nil {
			edit(r)
		}
		s.holds.mu.Lock()
		if s.holds.m == nil {
			s.holds.m = map[string]*reservation{}
		}
		s.holds.m[reservedID] = r
		s.holds.mu.Unlock()
		return func() {}
	}
}

// openapiExchanges are real requests to every route, with each answer the
// route has.
func openapiExchanges() []exchange {
	crossSite := map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}
	textPlain := map[string]string{"Content-Type": "text/plain"}
	big := `{"domain":"` + strings.Repeat("x", maxBody) + `"}`
	check := `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"r1"}]}]}`
	reset := `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"r1"}]}]}`
	simulate := `{"algorithm":"gcra","limit":2,"period":"1s","pattern":"burst 3"}`
	busy := func(s *Server) func() {
		s.simulating <- struct{}{}
		return func() { <-s.simulating }
	}
	// failOnce makes one decision whose store call fails, so that
	// GET /v1/status shows the store failing and its last error.
	failOnce := func(s *Server) func() {
		r := httptest.NewRequest("POST", "/v1/check", strings.NewReader(check))
		r.Header.Set("Content-Type", "application/json")
		s.Handler().ServeHTTP(httptest.NewRecorder(), r)
		return func() {}
	}
	const reserved = reservedID
	hold := holdReservation
	// reserve takes the unit of the reservation hold opens, as a reserve
	// would.
	reserve := func(s *Server) func() {
		s.check(context.Background(), "http", "rides", []descriptor{heldDescriptor})
		return hold(nil)(s)
	}
	xs := []exchange{
		// POST /v1/check
		{name: "check allowed", method: "POST", path: "/v1/check", body: check, want: 200},
		{name: "check every kind of status", method: "POST", path: "/v1/check", want: 200, body: `{"domain":"rides","descriptors":[
			{"entries":[{"key":"rider","value":"r3"}]},
			{"entries":[{"key":"city","value":"atlantis"}]},
			{"entries":[{"key":"tester","value":"t"}]},
			{"entries":[{"key":"queue","value":"q"}],"hits_addend":2},
			{"entries":[{"key":"backend","value":"b"}]},
			{"entries":[{"key":"nothing","value":"n"}]},
			{"entries":[]}]}`},
		{name: "check over limit", method: "POST", path: "/v1/check", want: 200, body: `{"domain":"rides","descriptors":[
			{"entries":[{"key":"blocked","value":"b"}]},
			{"entries":[{"key":"rider","value":"r2"}]}]}`},
		{name: "check impossible", method: "POST", path: "/v1/check", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"r2"}],"hits_addend":9}]}`, want: 200},
		{name: "check the whole burst", method: "POST", path: "/v1/check", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"r2"}],"hits_addend":3}]}`, want: 200},
		{name: "check retry after", method: "POST", path: "/v1/check", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"r2"}]}]}`, want: 200},
		{name: "check peek", method: "POST", path: "/v1/check", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"r1"}]}],"hits_addend":0}`, want: 200},
		{name: "check unmatched domain", method: "POST", path: "/v1/check", body: `{"domain":"ridez","descriptors":[{"entries":[{"key":"rider","value":"r1"}]}]}`, want: 200},
		{name: "check with Sluice-Timeout and charset", method: "POST", path: "/v1/check", body: check, header: map[string]string{"Content-Type": "application/json; charset=utf-8", TimeoutHeader: "1.5s"}, want: 200},
		{name: "check same origin", method: "POST", path: "/v1/check", body: check, header: map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}, want: 200},
		{name: "check no domain", method: "POST", path: "/v1/check", body: `{"domain":"","descriptors":[{"entries":[]}]}`, want: 400, invalid: true},
		{name: "check no descriptors", method: "POST", path: "/v1/check", body: `{"domain":"rides","descriptors":[]}`, want: 400, invalid: true},
		{name: "check unknown field", method: "POST", path: "/v1/check", body: `{"domain":"rides","descriptors":[{"entries":[]}],"colour":"red"}`, want: 400, invalid: true},
		{name: "check negative cost", method: "POST", path: "/v1/check", body: `{"domain":"rides","descriptors":[{"entries":[],"hits_addend":-1}]}`, want: 400, invalid: true},
		{name: "check not JSON", method: "POST", path: "/v1/check", body: `not json`, want: 400, invalid: true},
		{name: "check bad Sluice-Timeout", method: "POST", path: "/v1/check", body: check, header: map[string]string{"Content-Type": "application/json", TimeoutHeader: "soon"}, want: 400, invalid: true},
		{name: "check too large", method: "POST", path: "/v1/check", body: big, want: 413, invalid: true},
		{name: "check text/plain", method: "POST", path: "/v1/check", body: check, header: textPlain, want: 415, invalid: true},
		{name: "check cross-site", method: "POST", path: "/v1/check", body: check, header: crossSite, want: 403},
		{name: "check other origin", method: "POST", path: "/v1/check", body: check, header: map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, want: 403},
		{name: "check without configuration", on: "empty", method: "POST", path: "/v1/check", body: check, want: 503},
		{name: "check timeout passed", on: "stall", method: "POST", path: "/v1/check", body: check, header: map[string]string{"Content-Type": "application/json", TimeoutHeader: "50ms"}, want: 504},

		// POST /v1/reset
		{name: "reset, a check's descriptor", method: "POST", path: "/v1/reset", body: reset, want: 200},
		{name: "reset, entries (older form)", method: "POST", path: "/v1/reset", body: `{"domain":"rides","entries":[{"key":"rider","value":"r1"}]}`, want: 200},
		{name: "reset both forms", method: "POST", path: "/v1/reset", body: `{"domain":"rides","entries":[{"key":"rider","value":"r1"}],"descriptors":[{"entries":[{"key":"rider","value":"r1"}]}]}`, want: 400, invalid: true},
		{name: "reset two descriptors", method: "POST", path: "/v1/reset", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"r1"}]},{"entries":[{"key":"rider","value":"r2"}]}]}`, want: 400, invalid: true},
		{name: "reset with a cost", method: "POST", path: "/v1/reset", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"r1"}],"hits_addend":1}]}`, want: 400, invalid: true},
		{name: "reset no entries", method: "POST", path: "/v1/reset", body: `{"domain":"rides","entries":[]}`, want: 400, invalid: true},
		{name: "reset no domain", method: "POST", path: "/v1/reset", body: `{"entries":[{"key":"rider","value":"r1"}]}`, want: 400, invalid: true},
		{name: "reset bad Sluice-Timeout", method: "POST", path: "/v1/reset", body: reset, header: map[string]string{"Content-Type": "application/json", TimeoutHeader: "-1s"}, want: 400, invalid: true},
		{name: "reset no rule", method: "POST", path: "/v1/reset", body: `{"domain":"rides","entries":[{"key":"nothing","value":"x"}]}`, want: 404},
		{name: "reset unlimited rule", method: "POST", path: "/v1/reset", body: `{"domain":"rides","entries":[{"key":"city","value":"atlantis"}]}`, want: 404},
		{name: "reset too large", method: "POST", path: "/v1/reset", body: big, want: 413, invalid: true},
		{name: "reset text/plain", method: "POST", path: "/v1/reset", body: reset, header: textPlain, want: 415, invalid: true},
		{name: "reset cross-site", method: "POST", path: "/v1/reset", body: reset, header: crossSite, want: 403},
		{name: "reset store failed", on: "dead", method: "POST", path: "/v1/reset", body: reset, want: 502},
		{name: "reset without configuration", on: "empty", method: "POST", path: "/v1/reset", body: reset, want: 503},
		{name: "reset timeout passed", on: "stall", method: "POST", path: "/v1/reset", body: reset, header: map[string]string{"Content-Type": "application/json", TimeoutHeader: "50ms"}, want: 504},

		// POST /v1/charge, /v1/reserve, /v1/commit (charge_http.go)
		{name: "charge past the limit", method: "POST", path: "/v1/charge", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"c1"}]}],"hits_addend":9}`, want: 200, shows: []string{`"overall_code":"OVER_LIMIT"`, `"remaining":0`}},
		{name: "charge within the limit", method: "POST", path: "/v1/charge", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"c2"}]},{"entries":[{"key":"nothing","value":"n"}]}]}`, want: 200, shows: []string{`"overall_code":"OK"`}},
		{name: "charge negative", method: "POST", path: "/v1/charge", body: `{"domain":"rides","descriptors":[{"entries":[]}],"hits_addend":-1}`, want: 400, invalid: true},
		{name: "charge cross-site", method: "POST", path: "/v1/charge", body: check, header: crossSite, want: 403},
		{name: "charge text/plain", method: "POST", path: "/v1/charge", body: check, header: textPlain, want: 415, invalid: true},
		{name: "charge without configuration", on: "empty", method: "POST", path: "/v1/charge", body: check, want: 503},
		{name: "charge too large", method: "POST", path: "/v1/charge", body: big, want: 413, invalid: true},
		{name: "charge timeout passed", on: "stall", method: "POST", path: "/v1/charge", body: check, header: map[string]string{"Content-Type": "application/json", TimeoutHeader: "50ms"}, want: 504},
		{name: "reserve admitted", method: "POST", path: "/v1/reserve", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"v1"}]}],"hits_addend":2}`, want: 200, shows: []string{`"reservation_id":"`, `"expires_in":600`}},
		{name: "reserve refused", method: "POST", path: "/v1/reserve", body: `{"domain":"rides","descriptors":[{"entries":[{"key":"blocked","value":"b"}]}]}`, want: 200, shows: []string{`"overall_code":"OVER_LIMIT"`}},
		{name: "reserve no descriptors", method: "POST", path: "/v1/reserve", body: `{"domain":"rides","descriptors":[]}`, want: 400, invalid: true},
		{name: "reserve cross-site", method: "POST", path: "/v1/reserve", body: check, header: crossSite, want: 403},
		{name: "reserve text/plain", method: "POST", path: "/v1/reserve", body: check, header: textPlain, want: 415, invalid: true},
		{name: "reserve without configuration", on: "empty", method: "POST", path: "/v1/reserve", body: check, want: 503},
		{name: "reserve too large", method: "POST", path: "/v1/reserve", body: big, want: 413, invalid: true},
		{name: "reserve timeout passed", on: "stall", method: "POST", path: "/v1/reserve", body: check, header: map[string]string{"Content-Type": "application/json", TimeoutHeader: "50ms"}, want: 504},
		{name: "commit", method: "POST", path: "/v1/commit", before: reserve, body: `{"reservation_id":"` + reserved + `","hits_addend":5}`, want: 200, shows: []string{`"overall_code":"OVER_LIMIT"`}},
		{name: "commit twice", method: "POST", path: "/v1/commit", body: `{"reservation_id":"` + reserved + `","hits_addend":5}`, want: 404},
		{name: "commit while another is under way", method: "POST", path: "/v1/commit", before: hold(func(r *reservation) { r.committing = true }), body: `{"reservation_id":"` + reserved + `","hits_addend":5}`, want: 409, shows: []string{"under way"}},
		{name: "commit partly charged for another cost", method: "POST", path: "/v1/commit", before: hold(func(r *reservation) { r.recorded, r.cost = []bool{true}, 3 }), body: `{"reservation_id":"` + reserved + `","hits_addend":5}`, want: 409, shows: []string{"partly charged for hits_addend 3"}},
		{name: "commit store failed", on: "dead", method: "POST", path: "/v1/commit", before: hold(nil), body: `{"reservation_id":"` + reserved + `","hits_addend":5}`, want: 502, shows: []string{"descriptors [0]", "retry the commit"}},
		{name: "commit without configuration", on: "empty", method: "POST", path: "/v1/commit", before: hold(nil), body: `{"reservation_id":"` + reserved + `","hits_addend":5}`, want: 503, shows: []string{"stays open"}},
		{name: "commit timeout passed", on: "stall", method: "POST", path: "/v1/commit", before: hold(nil), body: `{"reservation_id":"` + reserved + `","hits_addend":5}`, header: map[string]string{"Content-Type": "application/json", TimeoutHeader: "50ms"}, want: 504, shows: []string{"stays open"}},
		{name: "commit without cost", method: "POST", path: "/v1/commit", body: `{"reservation_id":"x"}`, want: 400, invalid: true},
		{name: "commit cross-site", method: "POST", path: "/v1/commit", body: `{"reservation_id":"x","hits_addend":1}`, header: crossSite, want: 403},
		{name: "commit text/plain", method: "POST", path: "/v1/commit", body: `{"reservation_id":"x","hits_addend":1}`, header: textPlain, want: 415, invalid: true},
		{name: "commit too large", method: "POST", path: "/v1/commit", body: big, want: 413, invalid: true},

		// POST /v1/simulate
		{name: "simulate a rule by its key", method: "POST", path: "/v1/simulate", body: `{"rule":"rides.rider","pattern":"burst 6 at 0, then 1 every 100ms for 2s"}`, want: 200},
		{name: "simulate a rule with its domain", method: "POST", path: "/v1/simulate", body: `{"domain":"rides","rule":"rides.queue","pattern":"burst 8"}`, want: 200},
		{name: "simulate a policy", method: "POST", path: "/v1/simulate", body: simulate, want: 200},
		{name: "simulate rule and policy", method: "POST", path: "/v1/simulate", body: `{"rule":"rides.rider","algorithm":"gcra","limit":2,"period":"1s","pattern":"burst 3"}`, want: 400, invalid: true},
		{name: "simulate domain without rule", method: "POST", path: "/v1/simulate", body: `{"domain":"rides","algorithm":"gcra","limit":2,"period":"1s","pattern":"burst 3"}`, want: 400, invalid: true},
		{name: "simulate bad algorithm", method: "POST", path: "/v1/simulate", body: `{"algorithm":"magic","limit":2,"period":"1s","pattern":"burst 3"}`, want: 400, invalid: true},
		{name: "simulate unlimited rule", method: "POST", path: "/v1/simulate", body: `{"rule":"rides.city_atlantis","pattern":"burst 3"}`, want: 400},
		{name: "simulate bad pattern", method: "POST", path: "/v1/simulate", body: `{"rule":"rides.rider","pattern":"lots"}`, want: 400},
		{name: "simulate no such rule", method: "POST", path: "/v1/simulate", body: `{"rule":"rides.nothing","pattern":"burst 3"}`, want: 404},
		{name: "simulate rule of another domain", method: "POST", path: "/v1/simulate", body: `{"domain":"ridez","rule":"rides.rider","pattern":"burst 3"}`, want: 404},
		{name: "simulate too large", method: "POST", path: "/v1/simulate", body: big, want: 413, invalid: true},
		{name: "simulate text/plain", method: "POST", path: "/v1/simulate", body: simulate, header: textPlain, want: 415, invalid: true},
		{name: "simulate cross-site", method: "POST", path: "/v1/simulate", body: simulate, header: crossSite, want: 403},
		{name: "simulate busy", method: "POST", path: "/v1/simulate", body: simulate, before: busy, want: 503},
		{name: "simulate a rule without configuration", on: "empty", method: "POST", path: "/v1/simulate", body: `{"rule":"rides.rider","pattern":"burst 3"}`, want: 503},

		// GET routes
		{name: "rules", method: "GET", path: "/v1/rules", want: 200},
		{name: "rules without configuration", on: "empty", method: "GET", path: "/v1/rules", want: 200},
		{name: "rules with an RLQS division", on: "rlqs", method: "GET", path: "/v1/rules", want: 200, shows: []string{`"rlqs":[{"bucket":"rider=r1",`, `"demand":null`}},
		{name: "status", method: "GET", path: "/v1/status", want: 200},
		{name: "status without configuration", on: "empty", method: "GET", path: "/v1/status", want: 200},
		{name: "status, store failing", on: "dead", method: "GET", path: "/v1/status", before: failOnce, want: 200, shows: []string{`"state":"failing"`, `"last_error":`, `"last_error_at":`}},
		{name: "status, Redis store", on: "redis", method: "GET", path: "/v1/status", want: 200, shows: []string{`"kind":"redis"`, `"redis":{"breaker_open":false,`}},
		{name: "openapi", method: "GET", path: "/v1/openapi.json", want: 200},
		{name: "metrics", method: "GET", path: "/metrics", want: 200},
		{name: "metrics, a collector failed", on: "badmetrics", method: "GET", path: "/metrics", want: 500},
		{name: "healthz", method: "GET", path: "/healthz", want: 200},
		{name: "readyz", method: "GET", path: "/readyz", want: 200},
		{name: "readyz, store unreachable", on: "dead", method: "GET", path: "/readyz", want: 200},
		{name: "readyz without configuration", on: "empty", method: "GET", path: "/readyz", want: 503},
		{name: "page", method: "GET", path: "/", want: 200},

		// Not routes: the document's paths and methods say 404 or 405.
		{name: "check by GET", method: "GET", path: "/v1/check", want: 405},
		{name: "reset by PUT", method: "PUT", path: "/v1/reset", body: reset, want: 405},
		{name: "rules by POST", method: "POST", path: "/v1/rules", body: `{}`, want: 405},
		{name: "openapi by DELETE", method: "DELETE", path: "/v1/openapi.json", want: 405},
		{name: "page by POST", method: "POST", path: "/", body: `{}`, want: 405},
		{name: "unknown path", method: "GET", path: "/v1/nope", want: 404},
		{name: "unknown root path", method: "GET", path: "/nope", want: 404},
	}
	xs = append(xs, quotaExchanges()...)
	xs = append(xs, envoyExchanges()...)
	gets := []string{"/v1/rules", "/v1/status", "/v1/openapi.json", "/metrics", "/healthz", "/readyz", "/healthcheck", "/v1/usage?domain=rides&rider=r1", "/"}
	files, _ := fs.ReadDir(page, "page")
	for _, f := range files {
		if f.Name() != "index.html" {
			xs = append(xs, exchange{name: "page file " + f.Name(), method: "GET", path: "/" + f.Name(), want: 200})
			gets = append(gets, "/"+f.Name())
		}
	}
	// Every path refuses a browser that names a host it may not use
	// (hosts.go): a page rebound to this address.
	rebound := map[string]string{"User-Agent": "Mozilla/5.0", "Host": "rebound.example"}
	for _, p := range gets {
		xs = append(xs, exchange{name: "GET " + p + ", a browser at another host", method: "GET", path: p, header: rebound, want: 403, shows: []string{`Host \"rebound.example\" refused`, "--allowed-hosts=rebound.example"}})
	}
	return xs
}

// deadResetStore fails every call, Reset too.
type deadResetStore struct{ deadStore }

func (deadResetStore) Reset(context.Context, sluice.Policy, string) error { return errDead }

// failingCollector makes every scrape of /metrics fail.
type failingCollector struct{ desc *prometheus.Desc }

func (c failingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c failingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(c.desc, errors.New("the collector broke"))
}

// openapiServer returns the server named on (exchange.on), configured with
// openapiYAML unless it is "empty".
func openapiServer(t *testing.T, on string) *Server {
	t.Helper()
	var (
		store sluice.Store
		opts  = []Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	)
	if on != "notoken" {
		opts = append(opts, WithAdminTokens(AdminToken{Name: "ops", Token: openapiToken}))
	}
	if on == "full" {
		opts = append(opts, WithOverrideStore(fullOverrides{&MemoryOverrides{}}))
	}
	switch on {
	case "rides", "empty", "notoken", "full":
		ms := memstore.New(memstore.WithClock(sluicetest.NewClock(t0)))
		t.Cleanup(func() { ms.Close() })
		store = ms
	case "redis":
		rs, err := redisstore.Open("redis://" + sluicetest.StartRedis(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		store = rs
	case "rlqs":
		ms := memstore.New()
		t.Cleanup(func() { ms.Close() })
		store = ms
	case "badmetrics":
		store = memstore.New()
		opts = append(opts, WithCollector(failingCollector{prometheus.NewDesc("sluice_test_broken", "A collector that fails.", nil, nil)}))
	case "dead":
		store = deadResetStore{}
		opts = append(opts, WithOverrideStore(deadOverrides{}))
	case "stall":
		store = stallStore{}
	case "stallquota": // an override store that answers nothing (outside synctest: reportOrphans waits on it)
		ms := memstore.New()
		t.Cleanup(func() { ms.Close() })
		store = ms
		opts = append(opts, WithOverrideStore(stallOverrides{}))
	default:
		t.Fatalf("no server %q", on)
	}
	s, err := New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return t0 }
	if on != "empty" {
		c, err := config.Load(fstest.MapFS{"rides.yaml": {Data: []byte(openapiYAML)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	if on == "rlqs" {
		reportRLQS(t, s)
	}
	return s
}

// reportRLQS serves s's RLQS service over gRPC and opens one stream that
// reports a bucket of the rider rule and stays open until t ends, so that
// GET /v1/rules shows the rule's division.
func reportRLQS(t *testing.T, s *Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	s.RegisterGRPC(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "rides", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		{BucketId: &rlqspb.BucketId{Bucket: map[string]string{"rider": "r1"}}, NumRequestsAllowed: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // the assignment: the division is made
		t.Fatal(err)
	}
}

func (x exchange) request() *http.Request {
	var body io.Reader
	if x.body != "" {
		body = strings.NewReader(x.body)
	}
	r := httptest.NewRequest(x.method, x.path, body)
	r.Host = "localhost:8080" // as the operator's browser names it (hosts.go)
	if x.body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range x.header {
		switch {
		case k == "Host":
			r.Host = v
		case v == "":
			r.Header.Del(k)
		default:
			r.Header.Set(k, v)
		}
	}
	return r
}

// TestOpenAPIExchanges drives the real handlers through real requests, one
// for every route and every answer it has, and validates each request and
// each answer against the OpenAPI document (kin-openapi's openapi3filter):
// an answer with a status, a header or a field the document does not
// describe fails, and so does a request the server takes that the document
// calls invalid, or the reverse. A request to no route must be answered as
// the document's paths and methods say: 404, or 405 with an Allow header
// naming the document's methods for the path.
func TestOpenAPIExchanges(t *testing.T) {
	doc := loadOpenAPI(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	answered := map[string]bool{} // "POST /v1/check 415": an exchange showed it
	servers := map[string]*Server{}
	for _, on := range []string{"rides", "empty", "badmetrics", "dead", "redis", "rlqs", "notoken", "full", "stallquota"} {
		servers[on] = openapiServer(t, on)
	}
	for _, x := range openapiExchanges() {
		on := x.on
		if on == "" {
			on = "rides"
		}
		t.Run(x.name, func(t *testing.T) {
			if on == "stall" { // a Sluice-Timeout passes on a fake clock
				synctest.Test(t, func(t *testing.T) { validateExchange(t, router, openapiServer(t, on), x, answered) })
				return
			}
			validateExchange(t, router, servers[on], x, answered)
		})
	}
	// Every answer the document describes is shown by an exchange above.
	for p, item := range doc.Paths.Map() {
		for m, op := range item.Operations() {
			for code := range op.Responses.Map() {
				if k := m + " " + p + " " + code; !answered[k] {
					t.Errorf("the document says %s answers %s; add an exchange that shows it to openapiExchanges", m+" "+p, code)
				}
			}
		}
	}
}

// TestOpenAPIErrorPaths drives every route of the mux through the error
// paths every handler may take (a body too large, not JSON or of the wrong
// JSON type, a body not declared JSON, a Sluice-Timeout that passes or is
// not a duration, a cross-site POST, a browser naming a host it may not, a
// missing or wrong admin token), on servers in each state that changes an
// answer (configured, no configuration, a store that fails, one that does
// not answer, the limits API off, the override store full), and validates
// whatever each answers against the OpenAPI document: a status the handler
// answers and the document does not list for the operation fails here,
// although no exchange of openapiExchanges was written for it. A route
// that takes a body, a path wildcard or a query needs a sample request in
// routeSamples.
func TestOpenAPIErrorPaths(t *testing.T) {
	doc := loadOpenAPI(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	samples := routeSamples()
	var bases []exchange
	for _, p := range srv.mux().patterns {
		x, ok := samples[p]
		if !ok {
			method, path, _ := strings.Cut(p, " ")
			if method != "GET" || strings.Contains(path, "{") && path != "/{$}" {
				t.Errorf("route %s: add a sample request to routeSamples", p)
				continue
			}
			x = exchange{path: strings.TrimSuffix(path, "{$}")}
			x.method = method
		}
		x.name, x.probe = p, true
		bases = append(bases, x)
	}
	for name := range samples {
		if !slices.Contains(srv.mux().patterns, name) {
			t.Errorf("routeSamples has %s, which the mux does not route", name)
		}
	}
	for _, on := range []string{"rides", "empty", "dead", "notoken", "full", "stallquota", "stall"} {
		var s *Server
		if on != "stall" {
			s = openapiServer(t, on)
		}
		for _, base := range bases {
			for _, v := range errorPaths {
				x, ok := v.edit(base)
				if !ok {
					continue
				}
				// A store that does not answer holds a request without a
				// deadline until its client goes.
				if (on == "stall" || on == "stallquota") && x.header[TimeoutHeader] != "1ns" {
					continue
				}
				t.Run(on+"/"+v.name+"/"+base.name, func(t *testing.T) {
					if on == "stall" { // a Sluice-Timeout passes on a fake clock
						synctest.Test(t, func(t *testing.T) { validateExchange(t, router, openapiServer(t, on), x, nil) })
						return
					}
					validateExchange(t, router, s, x, nil)
				})
			}
		}
	}
}

// routeSamples are a request to each route that takes a body, a path
// wildcard or a query, by the route's pattern (the others are asked with
// their path alone): what TestOpenAPIErrorPaths edits into each error path.
func routeSamples() map[string]exchange {
	check := `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"r1"}]}]}`
	auth := map[string]string{"Authorization": "Bearer " + openapiToken}
	one := "/v1/limits/rides/tenant=acme"
	return map[string]exchange{
		"POST /v1/check":                             {method: "POST", path: "/v1/check", body: check},
		"POST /v1/reset":                             {method: "POST", path: "/v1/reset", body: check},
		"POST /v1/charge":                            {method: "POST", path: "/v1/charge", body: check},
		"POST /v1/reserve":                           {method: "POST", path: "/v1/reserve", body: check},
		"POST /v1/commit":                            {method: "POST", path: "/v1/commit", body: `{"reservation_id":"` + reservedID + `","hits_addend":5}`, before: holdReservation(nil)},
		"POST /v1/simulate":                          {method: "POST", path: "/v1/simulate", body: `{"rule":"rides.rider","pattern":"burst 3"}`},
		"POST /json":                                 {method: "POST", path: "/json", body: check},
		"GET /v1/usage":                              {method: "GET", path: "/v1/usage?domain=rides&rider=r1"},
		"GET /v1/limits/{domain}":                    {method: "GET", path: "/v1/limits/rides", header: auth},
		"GET /v1/limits/{domain}/{descriptor...}":    {method: "GET", path: one, header: auth},
		"PUT /v1/limits/{domain}/{descriptor...}":    {method: "PUT", path: one, header: auth, body: `{"requests_per_unit":50,"unit":"minute"}`},
		"DELETE /v1/limits/{domain}/{descriptor...}": {method: "DELETE", path: one, header: auth},
	}
}

// errorPaths are the edits of a route's sample request that
// TestOpenAPIErrorPaths makes: each returns the request to make, or false
// where the edit does not apply (a body's, to a request without one).
var errorPaths = []struct {
	name string
	edit func(exchange) (exchange, bool)
}{
	{"as is", func(x exchange) (exchange, bool) { return x, true }},
	{"Sluice-Timeout passed", withHeader(TimeoutHeader, "1ns")},
	{"Sluice-Timeout not a duration", withHeader(TimeoutHeader, "soon")},
	{"cross-site", withHeader("Sec-Fetch-Site", "cross-site")},
	{"a browser at another host", func(x exchange) (exchange, bool) {
		x, _ = withHeader("User-Agent", "Mozilla/5.0")(x)
		return withHeader("Host", "rebound.example")(x)
	}},
	{"no token", withHeader("Authorization", "")},
	{"a wrong token", withHeader("Authorization", "Bearer not-a-token")},
	{"body too large", withBody(`{"domain":"` + strings.Repeat("x", maxBody) + `"}`)},
	{"body not JSON", withBody("not json")},
	{"body of another JSON type", withBody("[]")},
	{"body not declared JSON", func(x exchange) (exchange, bool) {
		if x.body == "" {
			return x, false
		}
		return withHeader("Content-Type", "text/plain")(x)
	}},
}

// withHeader returns an edit that sets header name to v ("": removes it).
func withHeader(name, v string) func(exchange) (exchange, bool) {
	return func(x exchange) (exchange, bool) {
		h := maps.Clone(x.header)
		if h == nil {
			h = map[string]string{}
		}
		h[name] = v
		x.header = h
		return x, true
	}
}

// withBody returns an edit that replaces a request's body with b.
func withBody(b string) func(exchange) (exchange, bool) {
	return func(x exchange) (exchange, bool) {
		if x.body == "" {
			return x, false
		}
		x.body = b
		return x, true
	}
}

// validateExchange makes x's request, checks its answer against the
// document, and marks the operation and status in answered.
func validateExchange(t *testing.T, router routers.Router, s *Server, x exchange, answered map[string]bool) {
	ctx := context.Background()
	if x.before != nil {
		defer x.before(s)()
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, x.request())
	if !x.probe && rec.Code != x.want {
		t.Fatalf("%s %s: %d %s; want %d", x.method, x.path, rec.Code, rec.Body, x.want)
	}
	for _, want := range x.shows {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s %s: the answer %.300s lacks %s", x.method, x.path, rec.Body, want)
		}
	}

	req := x.request()
	route, params, err := router.FindRoute(req)
	if err != nil {
		// No operation: the answer must be the one the document's paths
		// and methods imply.
		var allow []string
		for _, m := range docMethods {
			probe := httptest.NewRequest(m, x.path, nil)
			if _, _, err := router.FindRoute(probe); err == nil {
				allow = append(allow, m)
				if m == "GET" {
					allow = append(allow, "HEAD")
				}
			}
		}
		slices.Sort(allow)
		switch {
		case len(allow) == 0 && rec.Code != http.StatusNotFound:
			t.Errorf("%s %s: no path of the document, answered %d, want 404", x.method, x.path, rec.Code)
		case len(allow) > 0 && (rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != strings.Join(allow, ", ")):
			t.Errorf("%s %s: the document's path takes %v; answered %d, Allow %q; want 405, Allow %q", x.method, x.path, allow, rec.Code, rec.Header().Get("Allow"), strings.Join(allow, ", "))
		}
		return
	}
	if answered != nil {
		answered[route.Method+" "+route.Path+" "+strconv.Itoa(rec.Code)] = true
	}
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true, // a status the document does not list fails
		MultiError:            true,
		// The handlers check credentials; the document only says which.
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	err = openapi3filter.ValidateRequest(ctx, in)
	switch {
	case x.probe:
	case x.invalid && err == nil:
		t.Errorf("%s %s: the document takes this request, which the server refuses (%d %s)", x.method, x.path, rec.Code, rec.Body)
	case !x.invalid && err != nil:
		t.Errorf("%s %s: the request does not match the document: %v", x.method, x.path, err)
	}
	if err := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 rec.Code,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options:                opts,
	}); err != nil {
		t.Errorf("%s %s: answer %d %.300s does not match the document: %v", x.method, x.path, rec.Code, rec.Body, err)
	}
}

// TestOpenAPIParts: a part (openapi/*.yaml beside sluice.yaml) adds its
// paths, components and tags to the document; naming a path, component or
// tag the document has, or holding anything else, is an error; the live
// page's files get paths of their own.
func TestOpenAPIParts(t *testing.T) {
	base := `openapi: 3.0.3
info: {title: t, version: v1}
tags: [{name: limits}]
paths:
  /v1/check:
    post:
      responses: {'200': {description: ok}}
components:
  responses:
    ForeignHost: {description: refused}
  schemas:
    Error: {type: object}
`
	pageFS := fstest.MapFS{"page/index.html": {}, "page/app.js": {}}
	part := `paths:
  /v1/usage/{tenant}:
    get:
      parameters: [{name: tenant, in: path, required: true, schema: {type: string}}]
      responses: {'200': {description: ok, content: {application/json: {schema: {$ref: '#/components/schemas/Usage'}}}}}
components:
  schemas:
    Usage: {type: object}
  securitySchemes:
    admin: {type: http, scheme: bearer}
tags: [{name: quotas}]
`
	b, err := buildOpenAPI(fstest.MapFS{"openapi/sluice.yaml": {Data: []byte(base)}, "openapi/quota.yaml": {Data: []byte(part)}}, pageFS)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if doc.Paths.Value("/v1/usage/{tenant}") == nil || doc.Paths.Value("/v1/check") == nil || doc.Paths.Value("/app.js") == nil || doc.Paths.Value("/index.html") != nil {
		t.Errorf("paths: %v", doc.Paths.InMatchingOrder())
	}
	if doc.Components.Schemas["Usage"] == nil || doc.Components.Schemas["Error"] == nil || doc.Components.SecuritySchemes["admin"] == nil || len(doc.Tags) != 2 {
		t.Errorf("components %v, tags %v", doc.Components, doc.Tags)
	}
	for _, tc := range []struct{ part, err string }{
		{"paths: {/v1/check: {}}", "paths: /v1/check: named twice"},
		{"components: {schemas: {Error: {}}}", "components: schemas: Error: named twice"},
		{"tags: [{name: limits}]", "tags: limits: named twice"},
		{"info: {title: mine}", "info: a part holds only paths, components and tags"},
		{"paths: {/app.js: {}}", "the page's files: paths: /app.js: named twice"},
	} {
		_, err := buildOpenAPI(fstest.MapFS{"openapi/sluice.yaml": {Data: []byte(base)}, "openapi/bad.yaml": {Data: []byte(tc.part)}}, pageFS)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("part %s: %v, want %q", tc.part, err, tc.err)
		}
	}
}
