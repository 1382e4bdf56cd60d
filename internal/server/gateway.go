// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/muxcheck"
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
// policies. It follows the server's configuration: Apply builds the
// policies of each configuration before putting it in force, and rejects
// one whose policies do not build (two route patterns that conflict, a
// pattern that does not parse), so the configuration in force stays.
type Gateway struct {
	s      *Server
	domain string
	ip     *clientip.Resolver
	proxy  *httputil.ReverseProxy
	cur    atomic.Pointer[gatewayState]

	failLog logEvery // proxyFailed's line
}

type gatewayState struct {
	handler http.Handler
}

// Gateway returns a reverse proxy to upstream that enforces the HTTP
// policies of domain, keying remote_address rules by ip. The upstream
// gets X-Forwarded-For (the inbound chain when the peer is a proxy ip
// trusts, then the peer), X-Forwarded-Host and X-Forwarded-Proto. Every later
// Apply builds its policies too. If a configuration is in force, its
// policies are built now, and an error is returned if they do not build.
func (s *Server) Gateway(upstream *url.URL, domain string, ip *clientip.Resolver) (*Gateway, error) {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			// Rewrite drops the inbound X-Forwarded-For: a trusted
			// proxy's chain is passed on, with the peer appended; an
			// untrusted client's is not (it could be anything).
			trusted := ip.TrustsPeer(pr.In)
			if xff := pr.In.Header["X-Forwarded-For"]; len(xff) > 0 && trusted {
				pr.Out.Header["X-Forwarded-For"] = append([]string(nil), xff...)
			}
			if !trusted {
				// The other headers an upstream may take a client's
				// address from: only a trusted proxy may set them.
				for _, h := range clientIPHeaders {
					pr.Out.Header.Del(h)
				}
			}
			pr.SetXForwarded()
		},
	}
	g := &Gateway{s: s, domain: domain, ip: ip, proxy: proxy}
	proxy.ErrorHandler = g.proxyFailed
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if sn := s.snap.Load(); sn != nil {
		h, err := g.build(sn)
		if err != nil {
			return nil, err
		}
		g.cur.Store(&gatewayState{handler: h})
	}
	s.gateways = append(s.gateways, g)
	return g, nil
}

// clientIPHeaders are the headers, besides X-Forwarded-For and Forwarded
// (which the proxy rewrites), that proxies, CDNs and frameworks use to
// pass on a client's address. The gateway removes them from a request of
// a peer it does not trust (--trusted-proxies), so an upstream that
// believes one of them cannot be told any address a client likes.
var clientIPHeaders = []string{
	"X-Real-Ip",
	"True-Client-Ip",
	"Cf-Connecting-Ip",
	"Fastly-Client-Ip",
	"X-Client-Ip",
	"Client-Ip",
	"X-Cluster-Client-Ip",
	"X-Original-Forwarded-For",
	"X-Envoy-External-Address",
	"X-Forwarded",
	"Forwarded-For",
	"X-Appengine-User-Ip",
}

// ServeHTTP implements http.Handler. Before the first configuration it
// answers 503. A request's httplimit.CriticalHeader (the claim on the
// in-flight reserve) is believed only from a peer ip trusts
// (--trusted-proxies); from any other it is removed before the limits see
// the request, and is not passed upstream.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := g.cur.Load()
	if st == nil {
		http.Error(w, "sluice gateway: no configuration loaded yet", http.StatusServiceUnavailable)
		return
	}
	if _, ok := r.Header[httplimit.CriticalHeader]; ok && !g.ip.TrustsPeer(r) {
		// Only a trusted proxy may claim the in-flight reserve.
		r.Header.Del(httplimit.CriticalHeader)
	}
	st.handler.ServeHTTP(w, r)
}

// proxyFailed is the proxy's ErrorHandler: the upstream did not answer
// (down, refused, reset). It answers 502, as ReverseProxy does, and logs
// at most one line a second, with the failures since the last one,
// rather than the standard library's line per request.
func (g *Gateway) proxyFailed(w http.ResponseWriter, r *http.Request, err error) {
	w.WriteHeader(http.StatusBadGateway)
	if n, ok := g.failLog.due(g.s.now().UnixNano()); ok {
		g.s.log.Warn("gateway: upstream failed; answering 502", "domain", g.domain, "method", r.Method, "path", cut(r.URL.Path, 256), "error", err, "failures_since_last_log", n)
	}
}

// ready reports whether the gateway has policies in force.
func (g *Gateway) ready() bool { return g.cur.Load() != nil }

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
	if err := CheckGateway(sn.cfg, g.domain); err != nil {
		return nil, err
	}
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
		switch pattern := ratePattern(r); {
		case len(r.Path) == 1 && key != nil && last.Value == "":
			global = append(global, httplimit.Limit{Limiter: l, Key: withPath(nil, last.Key, key), Shadow: shadow, Missing: httplimit.MissingSkipped, Name: headerName(r)})
			continue
		case pattern != "":
			if _, ok := routes[pattern]; !ok {
				order = append(order, pattern)
			}
			routes[pattern] = append(routes[pattern], httplimit.Limit{Limiter: l, Key: withPath(r.Path[:1], last.Key, key), Shadow: shadow, Missing: httplimit.MissingSkipped, Name: headerName(r)})
			continue
		}
		g.s.log.Warn("gateway: rule ignored (want remote_address or header:NAME, at the top or under a route)", "rule", r.FullKey, "file", r.File, "line", r.Line)
	}
	// A request without the descriptor's header is not limited by its rule
	// (MissingSkipped above), as Envoy sends no such descriptor; only a
	// trusted proxy may claim the in-flight reserve.
	opts := []httplimit.Option{httplimit.Global(global...), httplimit.WithCriticalFunc(httplimit.CriticalFrom(g.ip.TrustsPeer))}
	for _, p := range order {
		opts = append(opts, httplimit.Route(p, 1, routes[p]...))
	}
	opts = append(opts, extra...)
	m, err := httplimit.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("gateway domain %q: %w", g.domain, err)
	}
	return m.Handler(g.proxy), nil
}

// routeOrigin is a gateway route pattern and the first rule that names it.
type routeOrigin struct {
	pattern string
	rule    *config.Rule
}

func addOrigin(os []routeOrigin, pattern string, r *config.Rule) []routeOrigin {
	for _, o := range os {
		if o.pattern == pattern {
			return os
		}
	}
	return append(os, routeOrigin{pattern, r})
}

// checkRoutes reports the first route pattern of routes that does not
// parse or that conflicts with an earlier one (ServeMux panics on both),
// naming both patterns and the file and line of their rules.
func checkRoutes(domain string, routes []routeOrigin) error {
	mux := http.NewServeMux()
	prior := make([]string, 0, len(routes))
	for _, o := range routes {
		r, ok := muxcheck.Add(mux, http.NotFoundHandler(), o.pattern, prior)
		switch {
		case ok:
			prior = append(prior, o.pattern)
			continue
		case r.Conflict < 0:
			return fmt.Errorf("gateway domain %q: route %q (%s:%d): %s", domain, o.pattern, o.rule.File, o.rule.Line, r.Why)
		}
		prev := routes[r.Conflict]
		return fmt.Errorf("gateway domain %q: route %q (%s:%d) conflicts with route %q (%s:%d): %s",
			domain, o.pattern, o.rule.File, o.rule.Line, prev.pattern, prev.rule.File, prev.rule.Line, r.Why)
	}
	return nil
}

// CheckGateway reports whether the HTTP policies of domain in c would
// build in gateway mode: that its route patterns parse and do not
// conflict. It is what sluice config check runs; Apply checks the same
// (and more) for a running gateway.
func CheckGateway(c *config.Config, domain string) error {
	var origin, inflightOrigin []routeOrigin
	for _, r := range c.Rules() {
		if r.Domain != domain {
			continue
		}
		if r.InFlight != nil {
			if p := inflightPattern(r); p != "" {
				inflightOrigin = addOrigin(inflightOrigin, p, r)
			}
			continue
		}
		if p := ratePattern(r); p != "" && !r.Unlimited && !r.Deny {
			origin = addOrigin(origin, p, r)
		}
	}
	if err := checkRoutes(domain, origin); err != nil {
		return err
	}
	return checkRoutes(domain, inflightOrigin)
}

// ratePattern is the route pattern of a gateway rate rule under a route
// (route=PATTERN, then remote_address or header:NAME with no value), or "".
func ratePattern(r *config.Rule) string {
	if len(r.Path) != 2 || r.Path[0].Key != "route" || r.Path[0].Value == "" || strings.Contains(r.Path[0].Value, "*") {
		return ""
	}
	if last := r.Path[1]; last.Value != "" || !gatewayKey(last.Key) {
		return ""
	}
	return r.Path[0].Value
}

// gatewayKey reports whether the gateway knows the descriptor key (keyFunc).
func gatewayKey(key string) bool {
	name, isHeader := strings.CutPrefix(key, "header:")
	return key == "remote_address" || isHeader && name != ""
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

// headerName names a gateway rule in the response headers: its title
// (config.Rule.Title) when that is printable ASCII, else "" (its policy's
// name, its full key).
func headerName(r *config.Rule) string {
	if t := r.Title(); printable(t) {
		return t
	}
	return ""
}
