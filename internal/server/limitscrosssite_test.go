// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestLimitsAPICrossSite: the limits API, which changes what a tenant may
// use, refuses a cross-site browser request even when it carries a valid
// token (a page that learned or guessed it, a browser extension), and a
// body that is not declared JSON; neither changes the limit. Its GET
// answers carry no CORS header, so another origin cannot read them.
func TestLimitsAPICrossSite(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": tenantsYAML()}, WithAdminTokens(AdminToken{Name: "ops", Token: testToken}))
	send := func(method, path, body string, hdr map[string]string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, h.http.URL+path, bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	const one = "/v1/limits/api/alg=gcra/tenant=acme"
	set := `{"requests_per_unit":5}`
	json := "application/json"
	for _, c := range []struct {
		name, method, body string
		hdr                map[string]string
		want               int
	}{
		{"cross-site PUT", "PUT", set, map[string]string{"Content-Type": json, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"same-site PUT", "PUT", set, map[string]string{"Content-Type": json, "Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"other-origin PUT", "PUT", set, map[string]string{"Content-Type": json, "Origin": "https://evil.example"}, http.StatusForbidden},
		{"cross-site DELETE", "DELETE", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"text/plain PUT", "PUT", set, map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
	} {
		if code, _, body := send(c.method, one, c.body, c.hdr); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.want)
		}
	}
	if n := admittedHTTP(t, h.http.URL, "api", 5, "alg", "gcra", "tenant", "acme"); n != 2 {
		t.Fatalf("refused requests changed the limit: %d admitted, want the default 2", n)
	}
	code, hdr, body := send("GET", "/v1/limits/api", "", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
	if code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, body)
	}
	for k := range hdr {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("GET answered %s: %s; another origin could read it", k, hdr.Get(k))
		}
	}
	if hdr.Get("Cross-Origin-Resource-Policy") != "same-origin" {
		t.Errorf("GET's Cross-Origin-Resource-Policy %q, want same-origin", hdr.Get("Cross-Origin-Resource-Policy"))
	}
}
