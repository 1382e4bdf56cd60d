// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
)

// Gateway mode: the rules of one domain (GatewayDomain by default) become
// HTTP policies enforced by httplimit in front of an upstream. Their
// descriptor keys name what a request is counted by:
//
//	domain: gateway
//	descriptors:
//	  - key: remote_address          # every request, per client IP
//	    rate_limit: {unit: second, requests_per_unit: 20}
//	  - key: route                   # one route: a Go ServeMux pattern
//	    value: POST /v1/quotes
//	    descriptors:
//	      - key: header:X-Api-Key    # per value of a request header
//	        rate_limit: {unit: minute, requests_per_unit: 30, algorithm: token-bucket}
//
// A top-level remote_address or header:NAME rule applies to every request;
// one under a route applies to the requests that route matches. Every
// request costs 1. A rule's state is the one an RLS request with the same
// descriptor uses (route and value, then the key and the request's client
// IP or header value), so the gateway and RLS callers share one limit.
// shadow_mode is honoured; unlimited rules, zero limits and rules in any
// other shape are ignored by the gateway (and logged).

// GatewayDomain is the domain whose rules gateway mode enforces by default.
const GatewayDomain = "gateway"

// Gateway is a reverse proxy to an upstream that enforces a domain's HTTP
// policies. It follows the server's configuration: the policies are
// rebuilt on the first request after a reload.
type Gateway struct {
	s      *Server
	domain string
	ip     *httplimit.ClientIP
	proxy  http.Handler
	mu     sync.Mutex
	cur    atomic.Pointer[gatewayState]
}

type gatewayState struct {
	snap    *snapshot
	handler http.Handler
}

// Gateway returns a reverse proxy to upstream that enforces the HTTP
// policies of domain, keying remote_address rules by ip.
func (s *Server) Gateway(upstream *url.URL, domain string, ip *httplimit.ClientIP) *Gateway {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.SetXForwarded()
		},
	}
	return &Gateway{s: s, domain: domain, ip: ip, proxy: proxy}
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.handler().ServeHTTP(w, r)
}

// handler returns the middleware for the configuration in force, building
// it after a reload. If the new policies do not build, the previous ones
// stay, and the error is logged.
func (g *Gateway) handler() http.Handler {
	sn := g.s.snap.Load()
	if st := g.cur.Load(); st != nil && st.snap == sn {
		return st.handler
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.cur.Load()
	if prev != nil && prev.snap == sn {
		return prev.handler
	}
	h, err := g.build(sn)
	if err != nil {
		g.s.log.Error("gateway: the new configuration's HTTP policies do not build; keeping the previous ones", "domain", g.domain, "error", err)
		if prev == nil {
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "sluice gateway: no valid HTTP policies", http.StatusServiceUnavailable)
			})
		} else {
			h = prev.handler
		}
	}
	g.cur.Store(&gatewayState{snap: sn, handler: h})
	return h
}

// build compiles the domain's rules into an httplimit middleware in front
// of the proxy.
func (g *Gateway) build(sn *snapshot) (http.Handler, error) {
	if sn == nil {
		return nil, errUnavailable
	}
	var (
		global []httplimit.Limit
		routes = map[string][]httplimit.Limit{}
		order  []string
		extra  []httplimit.Option // in-flight rules (gateway_inflight.go)
	)
	for _, r := range sn.cfg.Rules() {
		if r.Domain != g.domain {
			continue
		}
		if r.InFlight != nil {
			if o := g.inflightOption(r); o != nil {
				extra = append(extra, o)
			}
			continue
		}
		l := sn.limiters[r]
		if l == nil {
			g.s.log.Warn("gateway: rule ignored (unlimited or zero limit)", "rule", r.FullKey, "file", r.File, "line", r.Line)
			continue
		}
		last := r.Path[len(r.Path)-1]
		key := g.keyFunc(last.Key)
		shadow := r.ShadowMode || sn.shadowed[r] != nil // WithShadowMode
		switch {
		case key == nil || last.Value != "" || len(r.Path) > 2:
		case len(r.Path) == 1:
			global = append(global, httplimit.Limit{Limiter: l, Key: withPath(nil, last.Key, key), Shadow: shadow})
			continue
		case r.Path[0].Key == "route" && r.Path[0].Value != "" && !strings.Contains(r.Path[0].Value, "*"):
			pattern := r.Path[0].Value
			if _, ok := routes[pattern]; !ok {
				order = append(order, pattern)
			}
			routes[pattern] = append(routes[pattern], httplimit.Limit{Limiter: l, Key: withPath(r.Path[:1], last.Key, key), Shadow: shadow})
			continue
		}
		g.s.log.Warn("gateway: rule ignored (want remote_address or header:NAME, at the top or under a route)", "rule", r.FullKey, "file", r.File, "line", r.Line)
	}
	opts := []httplimit.Option{httplimit.Global(global...)}
	for _, p := range order {
		opts = append(opts, httplimit.Route(p, 1, routes[p]...))
	}
	opts = append(opts, extra...)
	m, err := httplimit.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return m.Handler(g.proxy), nil
}

// keyFunc returns what a gateway descriptor key counts a request by, or
// nil for a key the gateway does not know.
func (g *Gateway) keyFunc(key string) httplimit.KeyFunc {
	if key == "remote_address" {
		return g.ip.Key
	}
	if name, ok := strings.CutPrefix(key, "header:"); ok && name != "" {
		return headerValue(name)
	}
	return nil
}

// headerValue is httplimit.Header without its hashing of values longer
// than httplimit.MaxKeyLen: the value goes into the store key (withPath)
// as an RLS request would send it, and storeKey bounds a long key by the
// same digest for both.
func headerValue(name string) httplimit.KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, bool) {
		vals := r.Header[name]
		if len(vals) == 0 {
			return "", false
		}
		v := strings.TrimSpace(vals[0])
		return v, v != ""
	}
}

// withPath turns a key function's value into the store key an RLS request
// with the descriptor (path..., (key, value)) would use.
func withPath(path []config.Entry, key string, f httplimit.KeyFunc) httplimit.KeyFunc {
	return func(r *http.Request) (string, bool) {
		v, ok := f(r)
		if !ok {
			return "", false
		}
		entries := append(append(make([]config.Entry, 0, len(path)+1), path...), config.Entry{Key: key, Value: v})
		return storeKey(nil, entries), true
	}
}
