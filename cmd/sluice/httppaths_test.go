// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/server"
	"github.com/sluicehq/sluice/memstore"
)

// TestHTTPPathsListEveryRoute: httpPaths, which serve's help and its
// start-up log line (http_paths) list, names every route the HTTP API
// serves and no other. The served routes are those of the API's OpenAPI
// document, which TestOpenAPIRoutes (internal/server) holds to the mux; the
// live page's files are all "GET /". The help shows each entry on a line.
func TestHTTPPathsListEveryRoute(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	srv, err := server.New(store)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/v1/openapi.json", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %s", w.Code, w.Body)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var served []string
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
			default:
				continue // parameters, summary, ...
			}
			var op struct {
				Tags []string `json:"tags"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			r := strings.ToUpper(method) + " " + path
			if slices.Contains(op.Tags, "page") {
				r = "GET /" // the page and its files
			}
			if !slices.Contains(served, r) {
				served = append(served, r)
			}
		}
	}
	var listed []string
	for _, e := range httpPaths {
		route, _, _ := strings.Cut(e, " (")
		methods, path, _ := strings.Cut(route, " ")
		path = strings.ReplaceAll(path, "...}", "}") // ServeMux's wildcard, OpenAPI's parameter
		for m := range strings.SplitSeq(methods, "|") {
			listed = append(listed, m+" "+path)
		}
		if !strings.Contains(serveUsage, "\n  "+e+"\n") {
			t.Errorf("sluice help serve does not list %q", e)
		}
	}
	for _, r := range served {
		if !slices.Contains(listed, r) {
			t.Errorf("%s is served but not in httpPaths (sluice help serve, the http_paths log)", r)
		}
	}
	for _, r := range listed {
		if !slices.Contains(served, r) {
			t.Errorf("httpPaths lists %s, which the HTTP API does not serve", r)
		}
	}
}
