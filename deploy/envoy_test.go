// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"os"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/internal/config"
)

// The extensions the examples name in typed_config, so that their Any
// values resolve (protojson looks them up in the global registry).
var (
	_ = (*ratelimitv3.RateLimit)(nil)
	_ = (*routerv3.Router)(nil)
	_ = (*hcmv3.HttpConnectionManager)(nil)
	_ = (*upstreamhttpv3.HttpProtocolOptions)(nil)
)

// decodeProto decodes YAML into m with protojson: unknown fields are
// errors, and every Any must name a registered type.
func decodeProto(data []byte, m proto.Message) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	return protojson.Unmarshal(j, m)
}

// validateDeep runs the generated ValidateAll on m and on every message
// inside it, unpacking each Any (which ValidateAll does not look into).
// It returns the number of Any values it unpacked.
func validateDeep(m proto.Message, path string) (int, error) {
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
	}
	if a, ok := m.(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return 0, fmt.Errorf("%s: %s: %w", path, a.GetTypeUrl(), err)
		}
		n, err := validateDeep(inner, path+"("+string(inner.ProtoReflect().Descriptor().FullName())+")")
		return n + 1, err
	}
	var (
		count int
		first error
	)
	visit := func(v protoreflect.Value, p string) {
		if first != nil {
			return
		}
		n, err := validateDeep(v.Message().Interface(), p)
		count += n
		first = err
	}
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				visit(l.Get(i), fmt.Sprintf("%s[%d]", p, i))
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				visit(mv, fmt.Sprintf("%s[%s]", p, k))
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			visit(v, p)
		}
		return first == nil
	})
	return count, first
}

// loadBootstrap decodes and validates deploy/envoy/envoy.yaml.
func loadBootstrap(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	b := loadBootstrapFile(t, "envoy/envoy.yaml")
	n, err := validateDeep(b, "bootstrap")
	if err != nil {
		t.Fatalf("envoy/envoy.yaml: %v", err)
	}
	if n != 4 { // the connection manager, its two filters, the HTTP/2 options
		t.Errorf("envoy/envoy.yaml: %d typed_config values validated, want 4", n)
	}
	return b
}

// loadBootstrapFile decodes an Envoy bootstrap strictly.
func loadBootstrapFile(t *testing.T, file string) *bootstrapv3.Bootstrap {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := decodeProto(data, b); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return b
}

// The decoder and the validation refuse what Envoy would.
func TestEnvoyDecoderIsStrict(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown field", "static_resources: {listners: []}", "listners"},
		{"unknown type", "static_resources: {clusters: [{name: x, typed_extension_protocol_options: {x: {'@type': type.googleapis.com/no.such.Type}}}]}", "no.such.Type"},
	} {
		if err := decodeProto([]byte(c.yaml), &bootstrapv3.Bootstrap{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
	// A ratelimit filter without a domain decodes but does not validate,
	// even inside an Any.
	b := &bootstrapv3.Bootstrap{}
	bad := `static_resources: {listeners: [{name: l, address: {socket_address: {address: 0.0.0.0, port_value: 1}}, filter_chains: [{filters: [{name: hcm, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, stat_prefix: x, route_config: {}, http_filters: [{name: rl, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit, rate_limit_service: {transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: c}}}}}]}}]}]}]}`
	if err := decodeProto([]byte(bad), b); err != nil {
		t.Fatal(err)
	}
	if _, err := validateDeep(b, "bootstrap"); err == nil || !strings.Contains(err.Error(), "Domain") {
		t.Errorf("a ratelimit filter with no domain: %v, want a validation error on Domain", err)
	}
}

func TestEnvoy(t *testing.T) {
	b := loadBootstrap(t)
	cfg, err := config.LoadDir("config")
	if err != nil {
		t.Fatalf("deploy/config: %v", err)
	}
	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	ls := b.GetStaticResources().GetListeners()
	if len(ls) != 1 || len(ls[0].GetFilterChains()) != 1 || len(ls[0].GetFilterChains()[0].GetFilters()) != 1 {
		t.Fatal("want one listener with one filter chain of one filter")
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := ls[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	rl := checkRateLimitFilter(t, "envoy.yaml", hcm.GetHttpFilters(), cfg)
	cluster := clusters[rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()]
	if cluster == nil {
		t.Fatalf("the ratelimit filter's cluster %q is not defined", rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName())
	}
	// RLS is gRPC: the cluster must speak HTTP/2.
	opts := &upstreamhttpv3.HttpProtocolOptions{}
	if err := cluster.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(opts); err != nil || opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("cluster %s: want explicit HTTP/2 (RLS is gRPC): %v", cluster.GetName(), err)
	}
	ep := cluster.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	_, c := sluiceContainer(t, loadManifests(t))
	grpcAddr, _ := flagValue(c.Args, "grpc-addr")
	if ep.GetAddress() != "sluice" || ep.GetPortValue() != uint32(portOf(t, grpcAddr)) {
		t.Errorf("cluster %s: endpoint %s:%d, want sluice (the Service and compose service) on the gRPC port %s", cluster.GetName(), ep.GetAddress(), ep.GetPortValue(), grpcAddr)
	}
	routes := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	for _, r := range routes {
		if clusters[r.GetRoute().GetCluster()] == nil {
			t.Errorf("route %v: cluster %q is not defined", r.GetMatch(), r.GetRoute().GetCluster())
		}
		checkDescriptors(t, "envoy.yaml route", rl.GetDomain(), r.GetRoute().GetRateLimits(), cfg)
	}
}

// checkRateLimitFilter finds the ratelimit filter among filters, checks it
// comes before the router and asks for a domain of cfg over RLS v3 with a
// stated failure mode and timeout, and returns it.
func checkRateLimitFilter(t *testing.T, where string, filters []*hcmv3.HttpFilter, cfg *config.Config) *ratelimitv3.RateLimit {
	t.Helper()
	rl := &ratelimitv3.RateLimit{}
	at, router := -1, -1
	for i, f := range filters {
		switch f.GetName() {
		case "envoy.filters.http.ratelimit":
			if err := f.GetTypedConfig().UnmarshalTo(rl); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			at = i
		case "envoy.filters.http.router":
			router = i
		}
	}
	if at < 0 {
		t.Fatalf("%s: no envoy.filters.http.ratelimit filter", where)
	}
	if router >= 0 && router < at {
		t.Errorf("%s: the router comes before the ratelimit filter, which then never runs", where)
	}
	checkFilterConfig(t, where, rl, cfg)
	return rl
}

// checkFilterConfig checks a ratelimit filter's configuration.
func checkFilterConfig(t *testing.T, where string, rl *ratelimitv3.RateLimit, cfg *config.Config) {
	t.Helper()
	if !contains(cfg.Domains(), rl.GetDomain()) {
		t.Errorf("%s: domain %q is not one of deploy/config's %v", where, rl.GetDomain(), cfg.Domains())
	}
	if rl.GetRateLimitService().GetTransportApiVersion().String() != "V3" {
		t.Errorf("%s: transport_api_version %v, want V3 (sluice speaks RLS v3)", where, rl.GetRateLimitService().GetTransportApiVersion())
	}
	if rl.GetTimeout() == nil || rl.GetTimeout().AsDuration() <= 0 {
		t.Errorf("%s: want an explicit timeout", where)
	}
	if rl.GetFailureModeDeny() {
		t.Errorf("%s: failure_mode_deny true: the examples fail open, as their comments say", where)
	}
}

// checkDescriptors checks that every descriptor the rate_limits send, with
// sample values, matches a rule of domain in cfg.
func checkDescriptors(t *testing.T, where, domain string, rls []*routev3.RateLimit, cfg *config.Config) {
	t.Helper()
	if len(rls) == 0 {
		t.Errorf("%s: no rate_limits: nothing is sent to sluice", where)
	}
	for i, r := range rls {
		var entries []config.Entry
		for _, a := range r.GetActions() {
			switch {
			case a.GetRemoteAddress() != nil:
				entries = append(entries, config.Entry{Key: "remote_address", Value: "192.0.2.1"})
			case a.GetRequestHeaders() != nil:
				entries = append(entries, config.Entry{Key: a.GetRequestHeaders().GetDescriptorKey(), Value: "sample"})
			case a.GetGenericKey() != nil:
				k := a.GetGenericKey().GetDescriptorKey()
				if k == "" {
					k = "generic_key"
				}
				entries = append(entries, config.Entry{Key: k, Value: a.GetGenericKey().GetDescriptorValue()})
			default:
				t.Errorf("%s: rate_limits[%d]: action %v: the test does not know its descriptor", where, i, a)
			}
		}
		if rule := cfg.Match(domain, entries); rule == nil {
			t.Errorf("%s: rate_limits[%d]: descriptor %v matches no rule of domain %q", where, i, entries, domain)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
