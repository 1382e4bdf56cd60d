// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// tokenBucket is a token-bucket assignment: tokensPerFill per fill
// interval into a bucket of maxTokens (0: refuse everything).
func tokenBucket(bid *rlqspb.BucketId, tokensPerFill, maxTokens int64, fill, ttl time.Duration) *rlqspb.RateLimitQuotaResponse_BucketAction {
	tb := &typev3.TokenBucket{
		MaxTokens:     uint32(maxTokens),
		TokensPerFill: wrapperspb.UInt32(uint32(max(tokensPerFill, 1))),
		FillInterval:  durationpb.New(fill),
	}
	return assignment(bid, &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: tb}}, ttl)
}

// blanket is an allow-all or deny-all assignment.
func blanket(bid *rlqspb.BucketId, allow bool, ttl time.Duration) *rlqspb.RateLimitQuotaResponse_BucketAction {
	r := typev3.RateLimitStrategy_DENY_ALL
	if allow {
		r = typev3.RateLimitStrategy_ALLOW_ALL
	}
	return assignment(bid, &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}, ttl)
}

// abandon tells Envoy to forget a bucket (until its next request makes it
// anew).
func abandon(bid *rlqspb.BucketId) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: bid,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{
			AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{},
		},
	}
}

func assignment(bid *rlqspb.BucketId, st *typev3.RateLimitStrategy, ttl time.Duration) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: bid,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(ttl),
				RateLimitStrategy:    st,
			},
		},
	}
}
