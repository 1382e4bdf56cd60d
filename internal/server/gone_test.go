// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

// TestClientGoneHTTP: a JSON API caller that has gone gets no answer and is
// counted as client_gone, not as a store failure nor as a decision of the
// rule's failure mode (defect 6: on main it was counted failed_local, with
// a store error).
func TestClientGoneHTTP(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	srv, err := New(store)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(mapFS("f.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(c); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest("POST", "/v1/check", strings.NewReader(`{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`)).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Body.Len() != 0 {
		t.Errorf("a gone caller was answered %d %q", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if want := `sluice_decisions_total{domain="d",policy="d.k",result="client_gone"} 1`; !strings.Contains(body, want) {
		t.Errorf("metrics lack %s", want)
	}
	for _, bad := range []string{`result="failed_local"`, `sluice_store_errors_total{domain="d"}`} {
		if strings.Contains(body, bad) {
			t.Errorf("metrics have %s", bad)
		}
	}
}
