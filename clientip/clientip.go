// SPDX-License-Identifier: Apache-2.0

// Package clientip resolves the address of the client that sent a request,
// safely behind trusted proxies, and turns it into a rate-limiting key.
//
// The peer (the connection's remote address) is the client, unless it is a
// proxy named by TrustProxies: then the one header those proxies set
// (X-Forwarded-For, Forwarded of RFC 7239, or X-Real-IP) is walked right to
// left, and the first address that is not a trusted proxy is the client,
// so nothing a client writes into those headers can change its key.
// Addresses are normalised (IPv4-mapped IPv6 to IPv4, zones dropped) and
// IPv6 addresses are aggregated to a prefix (/64 by default), so one host
// cannot mint millions of keys.
//
// A Resolver serves net/http directly (Key is an httplimit.KeyFunc) and any
// other transport through KeyFrom, given the peer and a way to read the
// forwarded header (grpclimit reads it from incoming metadata).
package clientip

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Source names the request header a trusted proxy uses to pass on the
// address of its client.
type Source uint8

// The headers a Resolver can read behind trusted proxies.
const (
	// XForwardedFor is X-Forwarded-For: a comma-separated list of addresses,
	// each proxy appending the address of its peer.
	XForwardedFor Source = iota + 1
	// Forwarded is the Forwarded header of RFC 7239: a list of elements, each
	// proxy appending one whose for= parameter is the address of its peer.
	Forwarded
	// XRealIP is X-Real-IP: one address, set by the proxy in front of the
	// server.
	XRealIP
)

// String returns the header's name.
func (s Source) String() string {
	switch s {
	case XForwardedFor:
		return "X-Forwarded-For"
	case Forwarded:
		return "Forwarded"
	case XRealIP:
		return "X-Real-IP"
	}
	return fmt.Sprintf("Source(%d)", uint8(s))
}

// Defaults of a Resolver.
const (
	// DefaultIPv6Prefix is the prefix length IPv6 clients are aggregated
	// to: a /64 is what one site or host is usually given.
	DefaultIPv6Prefix = 64
	// DefaultMaxHops is the most forwarded entries a Resolver examines.
	DefaultMaxHops = 16
)

// maxEntryLen bounds the length of one forwarded entry worth parsing: a
// bracketed IPv6 address with a zone and a port fits easily.
const maxEntryLen = 128

// Resolver resolves the address of the client that sent a request and
// turns it into a rate-limiting key. The zero Resolver (and a nil one)
// trusts no proxy and aggregates with the defaults: the client is the peer.
// A Resolver is safe for concurrent use.
type Resolver struct {
	source  Source
	trusted []netip.Prefix
	maxHops int
	v4Bits  int
	v6Bits  int
}

// Option configures a Resolver.
type Option func(*Resolver) error

// TrustProxies makes the Resolver believe the source header, but only on
// requests whose peer (RemoteAddr) lies in one of cidrs, and only as far
// as the chain of trusted proxies goes. cidrs are prefixes such as
// "10.0.0.0/8" or "fd00::/8", or single addresses. Name exactly the
// header your proxies set: any other header is the client's to forge.
// TrustProxies may be given several times for the same source.
func TrustProxies(source Source, cidrs ...string) Option {
	return func(c *Resolver) error {
		if source < XForwardedFor || source > XRealIP {
			return fmt.Errorf("clientip: TrustProxies: source %v: want XForwardedFor, Forwarded or XRealIP", source)
		}
		if len(cidrs) == 0 {
			return fmt.Errorf("clientip: TrustProxies(%v): no proxy CIDRs given", source)
		}
		if c.source != 0 && c.source != source {
			return fmt.Errorf("clientip: TrustProxies(%v): proxies already trusted for %v; read one header only", source, c.source)
		}
		c.source = source
		for _, s := range cidrs {
			p, err := parseCIDR(s)
			if err != nil {
				return fmt.Errorf("clientip: trusted proxy %q: %w", s, err)
			}
			c.trusted = append(c.trusted, p)
		}
		return nil
	}
}

func parseCIDR(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("zones are not allowed")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("an IPv4-mapped prefix needs at least 96 bits")
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// WithIPv6Prefix sets the prefix length IPv6 clients are aggregated to:
// every address in one prefix shares a key. 128 keys each address;
// the default is 64.
func WithIPv6Prefix(bits int) Option {
	return func(c *Resolver) error {
		if bits < 1 || bits > 128 {
			return fmt.Errorf("clientip: WithIPv6Prefix: bits %d: must be between 1 and 128", bits)
		}
		c.v6Bits = bits
		return nil
	}
}

// WithIPv4Prefix sets the prefix length IPv4 clients are aggregated to;
// the default, 32, keys each address.
func WithIPv4Prefix(bits int) Option {
	return func(c *Resolver) error {
		if bits < 1 || bits > 32 {
			return fmt.Errorf("clientip: WithIPv4Prefix: bits %d: must be between 1 and 32", bits)
		}
		c.v4Bits = bits
		return nil
	}
}

// WithMaxHops bounds the number of forwarded entries examined per request
// (DefaultMaxHops unless set). When every examined entry is a trusted
// proxy, the last one examined is taken as the client, so a header of
// thousands of entries costs no more than n.
func WithMaxHops(n int) Option {
	return func(c *Resolver) error {
		if n < 1 {
			return fmt.Errorf("clientip: WithMaxHops: n %d: must be at least 1", n)
		}
		c.maxHops = n
		return nil
	}
}

// New returns a Resolver. Without TrustProxies the client is always the
// peer, RemoteAddr, and no header is read.
func New(opts ...Option) (*Resolver, error) {
	c := &Resolver{}
	for _, o := range opts {
		if o == nil {
			continue // a nil option is no option
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Addr returns the client's address, normalised (an IPv4-mapped IPv6
// address becomes IPv4, a zone is dropped) but not aggregated. It reports
// false when RemoteAddr is not an IP address (a Unix socket, say).
func (c *Resolver) Addr(r *http.Request) (netip.Addr, bool) {
	return c.AddrFrom(r.RemoteAddr, func(s Source) []string { return r.Header[headerKeys[s]] })
}

// Key returns the client's rate-limiting key: its address, or the prefix it
// is aggregated to ("2001:db8:1:2::/64"). It has the shape of an
// httplimit.KeyFunc.
func (c *Resolver) Key(r *http.Request) (string, bool) {
	a, ok := c.Addr(r)
	if !ok {
		return "", false
	}
	return c.key(a), true
}

// TrustsPeer reports whether the request's peer (RemoteAddr) is one of the
// proxies TrustProxies names: whether the headers it set about its client
// may be believed.
func (c *Resolver) TrustsPeer(r *http.Request) bool { return c.Trusts(r.RemoteAddr) }

// Trusts reports whether peer, a remote address ("ip:port" or a bare
// address), is one of the proxies TrustProxies names.
func (c *Resolver) Trusts(peer string) bool {
	a, ok := parseRemoteAddr(peer)
	return ok && c != nil && c.source != 0 && c.isTrusted(a)
}

// AddrFrom is Addr for any transport: peer is the connection's remote
// address ("ip:port" or a bare address), and header returns the lines of
// the forwarded header named by the Source, in order (it is called only
// when the peer is a trusted proxy). A nil header is a transport without
// headers: the answer is the peer's address, as when the header is absent.
func (c *Resolver) AddrFrom(peer string, header func(Source) []string) (netip.Addr, bool) {
	a, ok := parseRemoteAddr(peer)
	if !ok {
		return netip.Addr{}, false
	}
	if c == nil || c.source == 0 || !c.isTrusted(a) {
		return a, true
	}
	var vals []string
	if header != nil {
		vals = header(c.source)
	}
	switch c.source {
	case XForwardedFor:
		return c.walk(vals, a, parseXFFEntry), true
	case Forwarded:
		return c.walk(vals, a, parseForwardedElement), true
	default:
		if len(vals) == 0 {
			return a, true
		}
		if x, ok := parseXFFEntry(vals[len(vals)-1]); ok {
			return x, true
		}
		return a, true
	}
}

// KeyFrom is Key for any transport, as AddrFrom is Addr.
func (c *Resolver) KeyFrom(peer string, header func(Source) []string) (string, bool) {
	a, ok := c.AddrFrom(peer, header)
	if !ok {
		return "", false
	}
	return c.key(a), true
}

// headerKeys are the sources' names as keys of an http.Header.
var headerKeys = [...]string{XForwardedFor: "X-Forwarded-For", Forwarded: "Forwarded", XRealIP: "X-Real-Ip"}

// key is a's rate-limiting key: a, or the prefix it is aggregated to.
func (c *Resolver) key(a netip.Addr) string {
	v4, v6 := 32, DefaultIPv6Prefix
	if c != nil && c.v4Bits != 0 {
		v4 = c.v4Bits
	}
	if c != nil && c.v6Bits != 0 {
		v6 = c.v6Bits
	}
	bits := v6
	if a.Is4() {
		bits = v4
	}
	if bits == a.BitLen() {
		return a.String()
	}
	return netip.PrefixFrom(a, bits).Masked().String()
}

func (c *Resolver) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// walk goes through the comma-separated entries of the header lines vals
// from the right, starting at the trusted peer: while the current address
// is a trusted proxy, the entry it appended names the next hop. It stops
// at the first address that is not a trusted proxy (the client), at an
// entry that does not parse (the current, trusted, hop is the best
// answer), or after c.maxHops entries (DefaultMaxHops when unset). It examines at
// most that many entries
// and allocates nothing.
func (c *Resolver) walk(vals []string, cur netip.Addr, parse func(string) (netip.Addr, bool)) netip.Addr {
	hops, maxHops := 0, c.maxHops
	if maxHops == 0 {
		maxHops = DefaultMaxHops
	}
	for i := len(vals) - 1; i >= 0; i-- {
		s := vals[i]
		for {
			if !c.isTrusted(cur) || hops == maxHops {
				return cur
			}
			hops++
			j := strings.LastIndexByte(s, ',')
			a, ok := parse(s[j+1:])
			if !ok {
				return cur
			}
			cur = a
			if j < 0 {
				break
			}
			s = s[:j]
		}
	}
	return cur
}

// normalize unmaps IPv4-mapped IPv6 addresses and drops zones.
func normalize(a netip.Addr) netip.Addr {
	return a.Unmap().WithZone("")
}

// parseRemoteAddr parses http.Request.RemoteAddr: "ip:port", "[ip]:port"
// or a bare address.
func parseRemoteAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	return netip.Addr{}, false
}

// parseNode parses an address as proxies write it: "192.0.2.1",
// "192.0.2.1:8080", "2001:db8::1", "[2001:db8::1]" or
// "[2001:db8::1]:8080".
func parseNode(s string) (netip.Addr, bool) {
	if len(s) == 0 || len(s) > maxEntryLen {
		return netip.Addr{}, false
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return normalize(a), true
		}
	}
	return netip.Addr{}, false
}

// parseXFFEntry parses one X-Forwarded-For entry.
func parseXFFEntry(s string) (netip.Addr, bool) {
	return parseNode(trimOWS(s))
}

// parseForwardedElement parses one forwarded-element of RFC 7239
// ("for=192.0.2.60;proto=http;by=203.0.113.43") and returns its for=
// address. An element without exactly one for= pair, or whose node is
// "unknown" or obfuscated, does not parse.
func parseForwardedElement(s string) (netip.Addr, bool) {
	var node string
	found := false
	for s != "" {
		var pair string
		if i := strings.IndexByte(s, ';'); i >= 0 {
			pair, s = s[:i], s[i+1:]
		} else {
			pair, s = s, ""
		}
		pair = trimOWS(pair)
		eq := strings.IndexByte(pair, '=')
		if eq < 0 {
			return netip.Addr{}, false
		}
		if !strings.EqualFold(pair[:eq], "for") {
			continue
		}
		if found {
			return netip.Addr{}, false // a parameter must not repeat
		}
		found, node = true, pair[eq+1:]
	}
	if !found {
		return netip.Addr{}, false
	}
	if len(node) >= 2 && node[0] == '"' && node[len(node)-1] == '"' {
		node = node[1 : len(node)-1]
		// A node never needs an escape or an inner quote.
		if strings.ContainsAny(node, "\\\"") {
			return netip.Addr{}, false
		}
	}
	return parseNode(node)
}

// trimOWS trims the optional whitespace (spaces and tabs) of HTTP fields.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
