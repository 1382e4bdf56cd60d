// SPDX-License-Identifier: Apache-2.0

package pace

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fixed answers every request with a RateLimit header naming a new policy
// each time, as a server that puts a tenant or request id in the name.
type fixed struct{ n int }

func (f *fixed) RoundTrip(req *http.Request) (*http.Response, error) {
	f.n++
	name := fmt.Sprintf("policy-%d", f.n)
	h := http.Header{}
	h.Set("RateLimit-Policy", fmt.Sprintf("%q;q=1000;w=1", name))
	h.Set("RateLimit", fmt.Sprintf("%q;r=999;t=1", name))
	return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// A server that names a new policy in every response leaves at most
// MaxPolicies of them in the Transport (defect 15c: one entry per name
// ever sent, forever), and the ones it named last are those remembered.
func TestPoliciesBounded(t *testing.T) {
	tr := New(&fixed{})
	for range 10 * MaxPolicies {
		req, _ := http.NewRequest("GET", "http://api.example/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	h := tr.hosts["api.example"]
	if n := len(h.pols); n != MaxPolicies {
		t.Fatalf("%d policies remembered; want %d", n, MaxPolicies)
	}
	if _, ok := h.pols[fmt.Sprintf("policy-%d", 10*MaxPolicies)]; !ok {
		t.Error("the policy named last was forgotten")
	}
}

// Requests to ever new hosts leave at most MaxHosts of them.
func TestHostsBounded(t *testing.T) {
	tr := New(&fixed{})
	for i := range MaxHosts + 100 {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://h%d.example/", i), nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := len(tr.hosts); n != MaxHosts {
		t.Fatalf("%d hosts remembered; want %d", n, MaxHosts)
	}
	if _, ok := tr.hosts[fmt.Sprintf("h%d.example", MaxHosts+99)]; !ok {
		t.Error("the host used last was forgotten")
	}
}

// The zero Transport sends through http.DefaultTransport.
func TestZeroTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	var tr Transport
	resp, err := (&http.Client{Transport: &tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
