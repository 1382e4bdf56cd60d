// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	rlqv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	networkinputsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rlqs"
)

// The extensions envoy-rlqs.yaml names in typed_config.
var (
	_ = (*rlqv3.RateLimitQuotaFilterConfig)(nil)
	_ = (*rlqv3.RateLimitQuotaBucketSettings)(nil)
	_ = (*matcherv3.HttpRequestHeaderMatchInput)(nil)
	_ = (*networkinputsv3.SourceIPInput)(nil)
)

// TestEnvoyRLQS decodes and validates deploy/envoy/envoy-rlqs.yaml as
// TestEnvoy does envoy.yaml, and checks that its rate_limit_quota filter
// asks sluice for a domain of deploy/config, and that every bucket its
// matchers build (with sample values) matches a rule of that domain as
// sluice serve's RLQS matches it, with stated no-assignment and
// expired-assignment behaviours.
func TestEnvoyRLQS(t *testing.T) {
	data, err := os.ReadFile("envoy/envoy-rlqs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := decodeProto(data, b); err != nil {
		t.Fatalf("envoy/envoy-rlqs.yaml: %v", err)
	}
	n, err := validateDeep(b, "bootstrap")
	if err != nil {
		t.Fatalf("envoy/envoy-rlqs.yaml: %v", err)
	}
	// The connection manager, its two filters, the HTTP/2 options, two
	// bucket settings, the header input of the predicate and of the
	// bucket id, and the source IP input.
	if n != 9 {
		t.Errorf("envoy/envoy-rlqs.yaml: %d typed_config values validated, want 9", n)
	}
	cfg, err := config.LoadDir("config")
	if err != nil {
		t.Fatalf("deploy/config: %v", err)
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	fc := &rlqv3.RateLimitQuotaFilterConfig{}
	at, router := -1, -1
	for i, f := range hcm.GetHttpFilters() {
		switch f.GetName() {
		case "envoy.filters.http.rate_limit_quota":
			if err := f.GetTypedConfig().UnmarshalTo(fc); err != nil {
				t.Fatal(err)
			}
			at = i
		case "envoy.filters.http.router":
			router = i
		}
	}
	if at < 0 || router < at {
		t.Fatalf("want a rate_limit_quota filter before the router (at %d, router at %d)", at, router)
	}
	if !cfg.HasDomain(fc.GetDomain()) {
		t.Errorf("domain %q is not one of deploy/config's %v", fc.GetDomain(), cfg.Domains())
	}
	var cluster string
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == fc.GetRlqsServer().GetEnvoyGrpc().GetClusterName() {
			cluster = c.GetName()
			opts := &upstreamhttpv3.HttpProtocolOptions{}
			if err := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(opts); err != nil || opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
				t.Errorf("cluster %s: want explicit HTTP/2 (RLQS is gRPC): %v", c.GetName(), err)
			}
		}
	}
	if cluster == "" {
		t.Errorf("rlqs_server's cluster %q is not defined", fc.GetRlqsServer().GetEnvoyGrpc().GetClusterName())
	}
	m := fc.GetBucketMatchers()
	var actions []*rlqv3.RateLimitQuotaBucketSettings
	for _, mm := range m.GetMatcherList().GetMatchers() {
		actions = append(actions, bucketSettings(t, mm.GetOnMatch().GetAction().GetTypedConfig().GetValue()))
	}
	if m.GetOnNoMatch() != nil {
		actions = append(actions, bucketSettings(t, m.GetOnNoMatch().GetAction().GetTypedConfig().GetValue()))
	}
	if len(actions) == 0 {
		t.Fatal("no bucket matchers: no request is put in a bucket")
	}
	rules := map[*config.Rule]bool{}
	for i, s := range actions {
		bucket := map[string]string{}
		for k, v := range s.GetBucketIdBuilder().GetBucketIdBuilder() {
			bucket[k] = v.GetStringValue()
			if v.GetCustomValue() != nil {
				bucket[k] = "sample"
			}
		}
		r := rlqs.MatchBucket(cfg, fc.GetDomain(), bucket)
		if r == nil {
			t.Errorf("bucket %d %v matches no rule of domain %q", i, bucket, fc.GetDomain())
		}
		rules[r] = true
		if iv := s.GetReportingInterval().AsDuration(); iv < time.Second {
			t.Errorf("bucket %d: reporting_interval %v: Envoy reports every few seconds; sluice measures demand over at least half a second", i, iv)
		}
		if s.GetNoAssignmentBehavior().GetFallbackRateLimit().GetBlanketRule() != typev3.RateLimitStrategy_ALLOW_ALL {
			t.Errorf("bucket %d: no_assignment_behavior: want ALLOW_ALL stated (the rules fail local, not closed)", i)
		}
		if tb := s.GetExpiredAssignmentBehavior().GetFallbackRateLimit().GetTokenBucket(); tb == nil || tb.GetFillInterval().GetSeconds() < 1 {
			t.Errorf("bucket %d: expired_assignment_behavior: want a token bucket with a whole-second fill interval (failure_mode local: this Envoy's share)", i)
		}
	}
	if len(rules) != len(cfg.Rules()) {
		t.Errorf("the buckets match %d rules; deploy/config has %d", len(rules), len(cfg.Rules()))
	}
}

func bucketSettings(t *testing.T, raw []byte) *rlqv3.RateLimitQuotaBucketSettings {
	t.Helper()
	s := &rlqv3.RateLimitQuotaBucketSettings{}
	if err := proto.Unmarshal(raw, s); err != nil {
		t.Fatal(err)
	}
	return s
}
