// SPDX-License-Identifier: Apache-2.0

package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// DNS rebinding. A page on a name its author controls (evil.example) can
// point that name at 127.0.0.1 once it has loaded; its later requests to
// evil.example:8080 then reach the HTTP API on the operator's machine, and
// to the browser they are same-origin: Sec-Fetch-Site says same-origin, the
// Origin matches, a JSON body needs no preflight, and the answers are
// readable. Only the Host header still says evil.example. So a request that
// comes from a browser must name the server in Host by:
//
//   - an IP address (the page's origin is then that address and port: the
//     page came from this server),
//   - localhost or a name under .localhost (browsers resolve these to
//     loopback themselves, never through DNS), or
//   - a name the operator allowed (WithAllowedHosts; serve's
//     --allowed-hosts): "sluice.example", "*.example" for the names under
//     it, "*" for any.
//
// Anything else is answered 403 on every path, naming the host and the flag.
//
// A request comes from a browser when it carries Origin or a Sec-Fetch-*
// header (browsers send Origin on every POST, and Sec-Fetch-Site to secure
// origins and localhost, not to a plain-http name), or a User-Agent
// starting "Mozilla/" (every browser's: what marks a same-origin GET to a
// rebound http name, which carries neither; a page's script cannot change
// it in Chromium). Clients that are not browsers (Envoy,
// Prometheus, the kubelet's probes, curl, Go's and most HTTP libraries)
// send none of these, so they reach the API by any name, as Kubernetes and
// Docker deployments do (sluice:8080, sluice.default.svc), with nothing to
// configure. Checking every request instead would break those deployments
// (or make each list its service names) for no gain: a rebinding attack
// needs a browser. The gateway (Server.Gateway) proxies for its upstream,
// whose names are its own, and is not checked; nor is gRPC.

// AllowedHostsFlag is serve's flag for WithAllowedHosts, which the refusal
// names.
const AllowedHostsFlag = "--allowed-hosts"

// WithAllowedHosts lets browsers reach the HTTP API under hosts as well as
// IP addresses and localhost: each a DNS name ("sluice.example.com", no
// port), "*.example.com" for every name under example.com, or "*" for
// any name (the check off). New fails for a malformed one.
func WithAllowedHosts(hosts ...string) Option {
	return func(s *Server) { s.hosts.patterns = append(s.hosts.patterns, hosts...) }
}

// ParseAllowedHosts splits a comma-separated list of allowed hosts (serve's
// --allowed-hosts) and checks each, as WithAllowedHosts takes them. An
// empty list is none.
func ParseAllowedHosts(list string) ([]string, error) {
	var out []string
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	for _, h := range strings.Split(list, ",") {
		h = strings.TrimSpace(h)
		if err := checkHostPattern(h); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// checkHostPattern checks one allowed host.
func checkHostPattern(h string) error {
	if h == "" {
		return errors.New("allowed host \"\": want a host name, *.domain or *")
	}
	if h == "*" {
		return nil
	}
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return nil // allowed anyway
	}
	name := strings.TrimPrefix(h, "*.")
	if strings.ContainsAny(name, ":/") {
		return fmt.Errorf("allowed host %q: want a host name without scheme or port (sluice.example.com, *.example.com)", h)
	}
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if label == "" || strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return fmt.Errorf("allowed host %q: want a host name of letters, digits, - and _ between dots (sluice.example.com, *.example.com)", h)
		}
	}
	return nil
}

// hostPolicy is the names browsers may reach the API under, beyond IP
// addresses and localhost.
type hostPolicy struct {
	patterns []string // WithAllowedHosts, as given
	anyHost  bool
	names    map[string]bool
	suffixes []string // ".example.com" for "*.example.com"
}

// compile checks the patterns and builds the policy from them.
func (p *hostPolicy) compile() error {
	p.names = map[string]bool{}
	for _, h := range p.patterns {
		if err := checkHostPattern(h); err != nil {
			return fmt.Errorf("server: %w", err)
		}
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		switch {
		case h == "*":
			p.anyHost = true
		case strings.HasPrefix(h, "*."):
			p.suffixes = append(p.suffixes, h[1:])
		default:
			p.names[h] = true
		}
	}
	return nil
}

// allows reports whether a browser may reach the API under host, a Host
// header (with or without a port).
func (p *hostPolicy) allows(host string) bool {
	if p.anyHost {
		return true
	}
	host, ok := hostName(host)
	if !ok {
		return false
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || p.names[host] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// hostName is a Host header's name without its port, and whether it is
// well formed: a name, or an address, and at most a port of digits.
func hostName(host string) (string, bool) {
	if h, port, err := net.SplitHostPort(host); err == nil {
		if port == "" || strings.Trim(port, "0123456789") != "" {
			return "", false
		}
		host = h
	}
	return host, host != ""
}

// fromBrowser reports whether r carries what browsers send and other
// clients do not (see the comment at the top of this file).
func fromBrowser(r *http.Request) bool {
	h := r.Header
	if h.Get("Origin") != "" || strings.HasPrefix(h.Get("User-Agent"), "Mozilla/") {
		return true
	}
	for k := range h {
		if strings.HasPrefix(k, "Sec-Fetch-") {
			return true
		}
	}
	return false
}

// checkHost refuses, with 403, a browser's request whose Host the policy
// does not allow.
func (p *hostPolicy) checkHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fromBrowser(r) && !p.allows(r.Host) {
			msg := fmt.Sprintf("Host %q refused: a browser may reach this API only by an IP address, localhost or a name in %s (a defence against DNS rebinding)", r.Host, AllowedHostsFlag)
			if name, ok := hostName(r.Host); ok && checkHostPattern(name) == nil {
				msg += fmt.Sprintf("; to serve it as %s, start sluice serve with %s=%s", name, AllowedHostsFlag, name)
			}
			writeError(w, http.StatusForbidden, "%s", msg)
			return
		}
		h.ServeHTTP(w, r)
	})
}
