// SPDX-License-Identifier: Apache-2.0

package clientip

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestResolver(t *testing.T) {
	plain, _ := New()
	trust := func(s Source) *Resolver {
		c, err := New(TrustProxies(s, "10.0.0.0/8", "2001:db8:ffff::/48", "192.168.1.1"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	xff, fwd, xri := trust(XForwardedFor), trust(Forwarded), trust(XRealIP)
	cases := []struct {
		name   string
		c      *Resolver
		remote string
		hdr    []string
		addr   string // "" for not ok
		key    string
	}{
		{"remote v4", plain, "192.0.2.1:1234", nil, "192.0.2.1", "192.0.2.1"},
		{"remote bare", plain, "192.0.2.1", nil, "192.0.2.1", "192.0.2.1"},
		{"remote mapped", plain, "[::ffff:192.0.2.1]:80", nil, "192.0.2.1", "192.0.2.1"},
		{"remote zone", plain, "[fe80::1%eth0]:80", nil, "fe80::1", "fe80::/64"},
		{"remote v6 aggregated", plain, "[2001:db8:1:2:3:4:5:6]:80", nil, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"remote garbage", plain, "@", nil, "", ""},
		{"remote empty", plain, "", nil, "", ""},
		{"no trust ignores XFF", plain, "192.0.2.1:1", []string{"X-Forwarded-For", "203.0.113.5"}, "192.0.2.1", "192.0.2.1"},
		{"untrusted peer ignores XFF", xff, "192.0.2.1:1", []string{"X-Forwarded-For", "203.0.113.5"}, "192.0.2.1", "192.0.2.1"},
		{"untrusted peer ignores Forwarded", fwd, "192.0.2.1:1", []string{"Forwarded", "for=203.0.113.5"}, "192.0.2.1", "192.0.2.1"},
		{"untrusted peer ignores X-Real-IP", xri, "192.0.2.1:1", []string{"X-Real-IP", "203.0.113.5"}, "192.0.2.1", "192.0.2.1"},
		{"xff one hop", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "203.0.113.5"}, "203.0.113.5", "203.0.113.5"},
		{"xff stops at the first untrusted", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "1.1.1.1, 203.0.113.5,10.0.0.2"}, "203.0.113.5", "203.0.113.5"},
		{"xff single trusted address", xff, "192.168.1.1:1", []string{"X-Forwarded-For", "203.0.113.5"}, "203.0.113.5", "203.0.113.5"},
		{"xff next to a single trusted address", xff, "192.168.1.2:1", []string{"X-Forwarded-For", "203.0.113.5"}, "192.168.1.2", "192.168.1.2"},
		{"xff several lines", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "1.1.1.1", "X-Forwarded-For", "203.0.113.5, 10.0.0.2"}, "203.0.113.5", "203.0.113.5"},
		{"xff across lines", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "1.1.1.1, 203.0.113.5", "X-Forwarded-For", "10.0.0.2"}, "203.0.113.5", "203.0.113.5"},
		{"xff garbage rightmost", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "203.0.113.5, bogus"}, "10.0.0.1", "10.0.0.1"},
		{"xff empty entry", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "203.0.113.5,"}, "10.0.0.1", "10.0.0.1"},
		{"xff garbage left of the client", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "<script>, 203.0.113.5"}, "203.0.113.5", "203.0.113.5"},
		{"xff all trusted", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "10.0.0.3, 10.0.0.2"}, "10.0.0.3", "10.0.0.3"},
		{"xff empty", xff, "10.0.0.1:1", []string{"X-Forwarded-For", ""}, "10.0.0.1", "10.0.0.1"},
		{"xff absent", xff, "10.0.0.1:1", nil, "10.0.0.1", "10.0.0.1"},
		{"xff port", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "203.0.113.5:8080"}, "203.0.113.5", "203.0.113.5"},
		{"xff v6 port", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "[2001:db8::1]:80"}, "2001:db8::1", "2001:db8::/64"},
		{"xff v6 brackets", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "[2001:db8::1]"}, "2001:db8::1", "2001:db8::/64"},
		{"xff mapped", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "::ffff:203.0.113.5"}, "203.0.113.5", "203.0.113.5"},
		{"xff mapped trusted proxy", xff, "[::ffff:10.0.0.1]:1", []string{"X-Forwarded-For", "203.0.113.5"}, "203.0.113.5", "203.0.113.5"},
		{"xff v6 trusted proxy", xff, "[2001:db8:ffff::9]:1", []string{"X-Forwarded-For", "203.0.113.5"}, "203.0.113.5", "203.0.113.5"},
		{"xff zone escaped", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "fe80::1%25eth0"}, "fe80::1", "fe80::/64"},
		{"xff zone raw", xff, "10.0.0.1:1", []string{"X-Forwarded-For", "fe80::1%eth0"}, "fe80::1", "fe80::/64"},
		{"fwd simple", fwd, "10.0.0.1:1", []string{"Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"}, "192.0.2.60", "192.0.2.60"},
		{"fwd quoted v6 port", fwd, "10.0.0.1:1", []string{"Forwarded", `For="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17", "2001:db8:cafe::/64"},
		{"fwd chain", fwd, "10.0.0.1:1", []string{"Forwarded", "for=1.1.1.1, for=203.0.113.5;proto=https, for=10.0.0.7"}, "203.0.113.5", "203.0.113.5"},
		{"fwd lines", fwd, "10.0.0.1:1", []string{"Forwarded", "for=203.0.113.5", "Forwarded", "for=10.0.0.7;by=10.0.0.1"}, "203.0.113.5", "203.0.113.5"},
		{"fwd unknown", fwd, "10.0.0.1:1", []string{"Forwarded", "for=unknown"}, "10.0.0.1", "10.0.0.1"},
		{"fwd obfuscated", fwd, "10.0.0.1:1", []string{"Forwarded", "for=_hidden"}, "10.0.0.1", "10.0.0.1"},
		{"fwd no for", fwd, "10.0.0.1:1", []string{"Forwarded", "proto=https"}, "10.0.0.1", "10.0.0.1"},
		{"fwd repeated for", fwd, "10.0.0.1:1", []string{"Forwarded", "for=203.0.113.5;for=1.1.1.1"}, "10.0.0.1", "10.0.0.1"},
		{"fwd escaped quote", fwd, "10.0.0.1:1", []string{"Forwarded", `for="203.0.113.5\""`}, "10.0.0.1", "10.0.0.1"},
		{"fwd unterminated quote left", fwd, "10.0.0.1:1", []string{"Forwarded", `for="x, for=203.0.113.5`}, "203.0.113.5", "203.0.113.5"},
		{"fwd ignores XFF", fwd, "10.0.0.1:1", []string{"X-Forwarded-For", "203.0.113.5"}, "10.0.0.1", "10.0.0.1"},
		{"xri", xri, "10.0.0.1:1", []string{"X-Real-IP", " 203.0.113.5 "}, "203.0.113.5", "203.0.113.5"},
		{"xri last line", xri, "10.0.0.1:1", []string{"X-Real-IP", "1.1.1.1", "X-Real-IP", "203.0.113.5"}, "203.0.113.5", "203.0.113.5"},
		{"xri garbage", xri, "10.0.0.1:1", []string{"X-Real-IP", "nope"}, "10.0.0.1", "10.0.0.1"},
		{"xri ignores XFF", xri, "10.0.0.1:1", []string{"X-Forwarded-For", "203.0.113.5"}, "10.0.0.1", "10.0.0.1"},
	}
	for _, c := range cases {
		r := httptestRequest(c.remote, c.hdr...)
		a, ok := c.c.Addr(r)
		key, kok := c.c.Key(r)
		if c.addr == "" {
			if ok || kok {
				t.Errorf("%s: got %v, %q; want none", c.name, a, key)
			}
			continue
		}
		if !ok || a != netip.MustParseAddr(c.addr) || !kok || key != c.key {
			t.Errorf("%s: got %v (%v), key %q; want %s, key %q", c.name, a, ok, key, c.addr, c.key)
		}
	}
}

func TestResolverPrefixes(t *testing.T) {
	c, err := New(WithIPv4Prefix(24), WithIPv6Prefix(48))
	if err != nil {
		t.Fatal(err)
	}
	for remote, want := range map[string]string{
		"192.0.2.77:1":                "192.0.2.0/24",
		"[2001:db8:aaaa:bbbb::1]:1":   "2001:db8:aaaa::/48",
		"[::ffff:198.51.100.200]:443": "198.51.100.0/24",
	} {
		if got, _ := c.Key(httptestRequest(remote)); got != want {
			t.Errorf("%s: key %q; want %q", remote, got, want)
		}
	}
	full, _ := New(WithIPv6Prefix(128))
	if got, _ := full.Key(httptestRequest("[2001:db8::1]:1")); got != "2001:db8::1" {
		t.Errorf("/128 key %q", got)
	}
}

// A header of 10,000 hops costs at most WithMaxHops entries and allocates
// nothing.
func TestResolverBoundedWork(t *testing.T) {
	c, _ := New(TrustProxies(XForwardedFor, "10.0.0.0/8"), WithMaxHops(16))
	hops := make([]string, 10_000)
	for i := range hops {
		hops[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
	}
	r := httptestRequest("10.0.0.1:1", "X-Forwarded-For", strings.Join(hops, ", "))
	a, _ := c.Addr(r)
	// Every hop is trusted: the 16th from the right is the last examined.
	if want := netip.MustParseAddr(hops[len(hops)-16]); a != want {
		t.Errorf("got %v; want %v, the 16th hop from the right", a, want)
	}
	if n := testing.AllocsPerRun(100, func() { c.Addr(r) }); n != 0 {
		t.Errorf("Addr allocates %v times per call", n)
	}
	garbage := httptestRequest("10.0.0.1:1", "X-Forwarded-For", strings.Repeat("x,", 50_000))
	if a, _ := c.Addr(garbage); a != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("garbage: got %v; want the peer", a)
	}
	f, _ := New(TrustProxies(Forwarded, "10.0.0.0/8"))
	fr := httptestRequest("10.0.0.1:1", "Forwarded", strings.Repeat("for=10.0.0.2;a=b;c=d,", 10_000))
	if n := testing.AllocsPerRun(100, func() { f.Addr(fr) }); n != 0 {
		t.Errorf("Forwarded: Addr allocates %v times per call", n)
	}
}

func TestResolverConfigErrors(t *testing.T) {
	for _, c := range []struct {
		opt  Option
		want string
	}{
		{TrustProxies(XForwardedFor, "10.0.0.0/33"), `trusted proxy "10.0.0.0/33"`},
		{TrustProxies(XForwardedFor, "ten"), `trusted proxy "ten"`},
		{TrustProxies(XForwardedFor, "fe80::1%eth0"), `trusted proxy "fe80::1%eth0"`},
		{TrustProxies(XForwardedFor, "::ffff:0:0/80"), `trusted proxy "::ffff:0:0/80"`},
		{TrustProxies(XForwardedFor), "no proxy CIDRs"},
		{TrustProxies(Source(9), "10.0.0.0/8"), "Source(9)"},
		{WithIPv6Prefix(0), "bits 0"},
		{WithIPv6Prefix(129), "bits 129"},
		{WithIPv4Prefix(33), "bits 33"},
		{WithMaxHops(0), "n 0"},
	} {
		_, err := New(c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v; want an error containing %q", err, c.want)
		}
	}
	if _, err := New(TrustProxies(XForwardedFor, "10.0.0.0/8"), TrustProxies(Forwarded, "10.0.0.0/8")); err == nil || !strings.Contains(err.Error(), "already trusted for X-Forwarded-For") {
		t.Errorf("two sources: %v", err)
	}
	// Mapped and non-canonical prefixes are normalised.
	c, err := New(TrustProxies(XForwardedFor, "::ffff:10.0.0.0/104", "192.168.7.9/16"))
	if err != nil {
		t.Fatal(err)
	}
	for _, remote := range []string{"10.1.2.3:1", "192.168.200.1:1"} {
		if a, _ := c.Addr(httptestRequest(remote, "X-Forwarded-For", "203.0.113.5")); a.String() != "203.0.113.5" {
			t.Errorf("peer %s not trusted", remote)
		}
	}
}

// Whatever the headers, the resolver never panics; the answer is the peer
// unless the peer is trusted, and always a valid, unzoned, unmapped
// address.
func FuzzResolver(f *testing.F) {
	f.Add("10.0.0.1:1", "203.0.113.5, 10.0.0.2", `for="[2001:db8::1]:80";proto=https`, "203.0.113.5")
	f.Add("192.0.2.1:1", "", "", "")
	f.Add("[::ffff:10.0.0.1]:1", ",,,,", `for=";for=,`, "[::1]")
	f.Add("[fe80::1%eth0]:1", "fe80::1%eth0", "for=\"\\\"\"", "999.1.1.1")
	var resolvers []*Resolver
	for _, s := range []Source{XForwardedFor, Forwarded, XRealIP} {
		c, err := New(TrustProxies(s, "10.0.0.0/8", "fe80::/10"), WithMaxHops(8))
		if err != nil {
			f.Fatal(err)
		}
		resolvers = append(resolvers, c)
	}
	f.Fuzz(func(t *testing.T, remote, xff, fwd, xri string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{
			"X-Forwarded-For": strings.Split(xff, "\n"),
			"Forwarded":       {fwd},
			"X-Real-Ip":       {xri},
		}}
		peer, peerOK := parseRemoteAddr(remote)
		for _, c := range resolvers {
			a, ok := c.Addr(r)
			if ok != peerOK {
				t.Fatalf("%v: ok %v but the peer parses: %v", c.source, ok, peerOK)
			}
			if !ok {
				continue
			}
			if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
				t.Fatalf("%v: got %v", c.source, a)
			}
			if !c.isTrusted(peer) && a != peer {
				t.Fatalf("%v: untrusted peer %v, but the client is %v", c.source, peer, a)
			}
			if key, ok := c.Key(r); !ok || key == "" {
				t.Fatalf("%v: no key for %v", c.source, a)
			}
		}
	})
}

// httptestRequest is a request from remote with header name/value pairs.
func httptestRequest(remote string, hdr ...string) *http.Request {
	r := &http.Request{RemoteAddr: remote, Header: http.Header{}}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

// The zero Resolver and a nil one are the defaults: the peer is the client,
// IPv4 keyed per address, IPv6 per /64, no header believed.
func TestResolverZero(t *testing.T) {
	for name, c := range map[string]*Resolver{"zero": {}, "nil": nil} {
		for remote, want := range map[string]string{
			"192.0.2.77:1":              "192.0.2.77",
			"[2001:db8:aaaa:bbbb::1]:1": "2001:db8:aaaa:bbbb::/64",
		} {
			r := httptestRequest(remote, "X-Forwarded-For", "203.0.113.5")
			if got, ok := c.Key(r); !ok || got != want {
				t.Errorf("%s: %s: key %q, %v; want %q", name, remote, got, ok, want)
			}
			if c.TrustsPeer(r) {
				t.Errorf("%s: trusts %s", name, remote)
			}
		}
	}
}

// KeyFrom reads the forwarded header through the function it is given, and
// only for a trusted peer.
func TestResolverKeyFrom(t *testing.T) {
	c, err := New(TrustProxies(XRealIP, "10.0.0.0/8"))
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	header := func(s Source) []string {
		asked++
		if s != XRealIP {
			t.Errorf("asked for %v", s)
		}
		return []string{"203.0.113.5"}
	}
	if key, ok := c.KeyFrom("10.1.1.1:5", header); !ok || key != "203.0.113.5" {
		t.Errorf("trusted peer: key %q, %v", key, ok)
	}
	if key, ok := c.KeyFrom("192.0.2.1:5", header); !ok || key != "192.0.2.1" {
		t.Errorf("untrusted peer: key %q, %v", key, ok)
	}
	if asked != 1 {
		t.Errorf("header read %d times; want once (for the trusted peer only)", asked)
	}
	if _, ok := c.KeyFrom("pipe", header); ok {
		t.Error("a peer that is no address has a key")
	}
}

// A nil header function is a transport without headers (a protocol of the
// user's own): a trusted peer is keyed as itself, as when the header is
// absent, under every source, never a panic.
func TestResolverKeyFromNilHeader(t *testing.T) {
	for _, s := range []Source{XForwardedFor, Forwarded, XRealIP} {
		c, err := New(TrustProxies(s, "10.0.0.0/8"))
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%v: KeyFrom(trusted peer, nil) panicked: %v", s, p)
				}
			}()
			if key, ok := c.KeyFrom("10.0.0.7:4000", nil); !ok || key != "10.0.0.7" {
				t.Errorf("%v: KeyFrom(trusted peer, nil) = %q, %v; want \"10.0.0.7\", true", s, key, ok)
			}
		}()
	}
}
