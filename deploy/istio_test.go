// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/internal/config"
)

// loadEnvoyFilter decodes istio/envoyfilter.yaml: the object's envelope
// strictly, its spec with protojson into istio.io/api's EnvoyFilter
// (unknown fields rejected).
func loadEnvoyFilter(t *testing.T) (metav1.ObjectMeta, *networkingv1alpha3.EnvoyFilter) {
	t.Helper()
	data, err := os.ReadFile("istio/envoyfilter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Spec       json.RawMessage   `json:"spec"`
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.DisallowUnknownFields()
	if err := d.Decode(&obj); err != nil {
		t.Fatalf("istio/envoyfilter.yaml: %v", err)
	}
	if obj.APIVersion != "networking.istio.io/v1alpha3" || obj.Kind != "EnvoyFilter" {
		t.Fatalf("istio/envoyfilter.yaml: %s %s, want networking.istio.io/v1alpha3 EnvoyFilter", obj.APIVersion, obj.Kind)
	}
	ef := &networkingv1alpha3.EnvoyFilter{}
	if err := protojson.Unmarshal(obj.Spec, ef); err != nil {
		t.Fatalf("istio/envoyfilter.yaml: spec: %v", err)
	}
	return obj.Metadata, ef
}

// patchValue decodes a patch's value (a Struct) as the Envoy message m.
func patchValue(p *networkingv1alpha3.EnvoyFilter_Patch, m proto.Message) error {
	j, err := protojson.Marshal(p.GetValue())
	if err != nil {
		return err
	}
	return protojson.Unmarshal(j, m)
}

func TestIstio(t *testing.T) {
	meta, ef := loadEnvoyFilter(t)
	if meta.Name == "" || meta.Namespace != "istio-system" {
		t.Errorf("metadata: name %q namespace %q: want a name, in istio-system (where the ingress gateway runs)", meta.Name, meta.Namespace)
	}
	if ef.GetWorkloadSelector().GetLabels()["istio"] != "ingressgateway" {
		t.Errorf("workloadSelector %v: want the ingress gateway", ef.GetWorkloadSelector())
	}
	cfg, err := config.LoadDir("config")
	if err != nil {
		t.Fatal(err)
	}
	// The Envoy bootstrap's route descriptors, which the EnvoyFilter must
	// reproduce.
	b := loadBootstrap(t)
	hcm := &hcmv3.HttpConnectionManager{}
	if err := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	wantLimits := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetRateLimits()

	m := loadManifests(t)
	svc := m.services["sluice"]
	var grpcPort int32
	for _, p := range svc.Spec.Ports {
		if p.Name == "grpc" {
			grpcPort = p.Port
		}
	}
	wantCluster := fmt.Sprintf("outbound|%d||%s.sluice.svc.cluster.local", grpcPort, svc.Name)

	var sawFilter, sawRoutes bool
	for i, cp := range ef.GetConfigPatches() {
		where := fmt.Sprintf("configPatches[%d] (%s)", i, cp.GetApplyTo())
		switch cp.GetApplyTo() {
		case networkingv1alpha3.EnvoyFilter_HTTP_FILTER:
			sawFilter = true
			if cp.GetPatch().GetOperation() != networkingv1alpha3.EnvoyFilter_Patch_INSERT_BEFORE ||
				cp.GetMatch().GetListener().GetFilterChain().GetFilter().GetSubFilter().GetName() != "envoy.filters.http.router" {
				t.Errorf("%s: want INSERT_BEFORE the router", where)
			}
			f := &hcmv3.HttpFilter{}
			if err := patchValue(cp.GetPatch(), f); err != nil {
				t.Fatalf("%s: value as %T: %v", where, f, err)
			}
			if n, err := validateDeep(f, where); err != nil || n != 1 {
				t.Fatalf("%s: %v (%d typed_config validated, want 1)", where, err, n)
			}
			rl := checkRateLimitFilter(t, where, []*hcmv3.HttpFilter{f}, cfg)
			if c := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName(); c != wantCluster {
				t.Errorf("%s: cluster %q, want Istio's for the sluice Service's gRPC port, %q", where, c, wantCluster)
			}
		case networkingv1alpha3.EnvoyFilter_VIRTUAL_HOST:
			sawRoutes = true
			if cp.GetPatch().GetOperation() != networkingv1alpha3.EnvoyFilter_Patch_MERGE {
				t.Errorf("%s: want MERGE", where)
			}
			// A MERGE value is a partial VirtualHost: decode it as one
			// (unknown fields rejected) and validate what it sets.
			vh := &routev3.VirtualHost{}
			if err := patchValue(cp.GetPatch(), vh); err != nil {
				t.Fatalf("%s: value as %T: %v", where, vh, err)
			}
			for j, r := range vh.GetRateLimits() {
				if _, err := validateDeep(r, fmt.Sprintf("%s.rate_limits[%d]", where, j)); err != nil {
					t.Error(err)
				}
			}
			checkDescriptors(t, where, "edge", vh.GetRateLimits(), cfg)
			if len(vh.GetRateLimits()) != len(wantLimits) {
				t.Errorf("%s: %d rate_limits, envoy.yaml has %d", where, len(vh.GetRateLimits()), len(wantLimits))
			}
			for j := range min(len(vh.GetRateLimits()), len(wantLimits)) {
				if !proto.Equal(vh.GetRateLimits()[j], wantLimits[j]) {
					t.Errorf("%s: rate_limits[%d] differs from envoy.yaml's", where, j)
				}
			}
		default:
			t.Errorf("%s: unexpected patch", where)
		}
	}
	if !sawFilter || !sawRoutes {
		t.Errorf("want an HTTP_FILTER patch (the ratelimit filter) and a VIRTUAL_HOST patch (the descriptors)")
	}
}
