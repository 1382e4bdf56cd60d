// SPDX-License-Identifier: Apache-2.0

package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing/fstest"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/server"
	"github.com/sluicehq/sluice/memstore"
)

// A tenant's own limit, set at runtime through the limits API, and its
// usage.
func ExampleWithAdminTokens() {
	store := memstore.New()
	defer store.Close()
	srv, err := server.New(store, server.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		server.WithAdminTokens(server.AdminToken{Name: "ops", Token: "an-admin-token-of-some-length"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := config.Load(fstest.MapFS{"api.yaml": {Data: []byte(`
domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 100, overridable: true}
`)}})
	if err == nil {
		err = srv.Apply(c)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	h := srv.Handler()
	do := func(method, path, body string) string {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer an-admin-token-of-some-length")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Body.String()
	}
	do("PUT", "/v1/limits/api/tenant=acme", `{"requests_per_unit": 5000}`)
	do("POST", "/v1/check", `{"domain":"api","descriptors":[{"entries":[{"key":"tenant","value":"acme"}]}]}`)
	var u server.Usage
	json.Unmarshal([]byte(do("GET", "/v1/usage?domain=api&tenant=acme", "")), &u)
	fmt.Printf("acme: %d of %d used, %d left (override %v)\n", u.Used, u.Limit, u.Remaining, u.Override)
	u = server.Usage{}
	json.Unmarshal([]byte(do("GET", "/v1/usage?domain=api&tenant=other", "")), &u)
	fmt.Printf("other: %d of %d used (override %v)\n", u.Used, u.Limit, u.Override)
	// Output:
	// acme: 1 of 5000 used, 4999 left (override true)
	// other: 0 of 100 used (override false)
}
