// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
)

// The per-IP rule limits on the remote_address descriptor, so the edge
// listener must take the client address from the TCP peer and trust no
// X-Forwarded-For: otherwise a client sends a new X-Forwarded-For on each
// request and gets a new bucket each time.
func TestEnvoyClientAddressNotForgeable(t *testing.T) {
	for file, b := range map[string]*bootstrapv3.Bootstrap{
		"envoy.yaml":      loadBootstrap(t),
		"envoy-rlqs.yaml": loadBootstrapFile(t, "envoy/envoy-rlqs.yaml"),
	} {
		edgeListeners(t, file, b)
	}
	// The comment says what to set behind a load balancer.
	data, err := os.ReadFile("envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"xff_num_trusted_hops", "envoy.filters.listener.proxy_protocol"} {
		if !regexp.MustCompile(`(?m)^\s*#.*` + regexp.QuoteMeta(want)).Match(data) {
			t.Errorf("envoy/envoy.yaml: no comment names %s (what to set behind a load balancer)", want)
		}
	}
}

// Istio's gateway already uses the peer address and trusts
// numTrustedProxies hops: the EnvoyFilter must not patch the connection
// manager, and its comment must say how to set numTrustedProxies, with a
// ProxyConfig that Istio would accept.
func TestIstioClientAddress(t *testing.T) {
	_, ef := loadEnvoyFilter(t)
	for _, cp := range ef.GetConfigPatches() {
		if cp.GetApplyTo() == networkingv1alpha3.EnvoyFilter_NETWORK_FILTER || cp.GetApplyTo() == networkingv1alpha3.EnvoyFilter_LISTENER {
			t.Errorf("a %s patch: the example must not change how the gateway finds the client address", cp.GetApplyTo())
		}
	}
	data, err := os.ReadFile("istio/envoyfilter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The annotation value the comment shows decodes as a ProxyConfig
	// (unknown fields rejected) and sets numTrustedProxies.
	m := regexp.MustCompile(`(?m)^#\s+(\{"gatewayTopology".*\})\s*$`).FindSubmatch(data)
	if m == nil {
		t.Fatal(`istio/envoyfilter.yaml: no comment line showing a {"gatewayTopology": ...} proxy config`)
	}
	pc := &meshv1alpha1.ProxyConfig{}
	if err := protojson.Unmarshal(m[1], pc); err != nil {
		t.Fatalf("istio/envoyfilter.yaml: the proxy config in the comment: %v", err)
	}
	if pc.GetGatewayTopology().GetNumTrustedProxies() == 0 {
		t.Errorf("istio/envoyfilter.yaml: the proxy config in the comment sets no numTrustedProxies")
	}
	for _, want := range []string{"numTrustedProxies", "proxyProtocol", "externalTrafficPolicy: Local"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("istio/envoyfilter.yaml: the comment does not name %s", want)
		}
	}
}

// edgeListeners checks that every connection manager of b takes the client
// address from the TCP peer.
func edgeListeners(t *testing.T, file string, b *bootstrapv3.Bootstrap) {
	t.Helper()
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
					continue
				}
				where := file + " listener " + l.GetName()
				if !hcm.GetUseRemoteAddress().GetValue() {
					t.Errorf("%s: use_remote_address is not true: the client address comes from the client's own X-Forwarded-For", where)
				}
				if n := hcm.GetXffNumTrustedHops(); n != 0 {
					t.Errorf("%s: xff_num_trusted_hops %d on an edge listener: the client can forge the address", where, n)
				}
				if len(hcm.GetOriginalIpDetectionExtensions()) != 0 {
					t.Errorf("%s: original_ip_detection_extensions replace the peer address", where)
				}
			}
		}
	}
}
