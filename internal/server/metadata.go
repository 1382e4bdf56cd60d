// SPDX-License-Identifier: Apache-2.0

package server

import (
	"maps"

	"google.golang.org/protobuf/types/known/structpb"
)

// Keys of the RLS response's dynamic_metadata that report quota mode, as
// envoyproxy/ratelimit names them.
const (
	// QuotaModeEnabledKey is true when the request matched a quota-mode
	// rule.
	QuotaModeEnabledKey = "quotaModeEnabled"
	// QuotaModeViolationsKey lists the indices (into the request's
	// descriptors) of the quota-mode descriptors over their quota.
	QuotaModeViolationsKey = "quotaModeViolations"
)

// passedMetadata merges the metadata of every descriptor whose rule passed
// (matched, not over its limit): the mapping envoyproxy/ratelimit returns
// so that the caller can pick, say, a backend that still has quota. A key
// in several descriptors' metadata takes the last one's value. It returns
// nil when there is nothing to say.
func passedMetadata(outs []outcome) map[string]any {
	var m map[string]any
	for i := range outs {
		r := outs[i].rule
		if r == nil || r.Metadata == nil || outs[i].over {
			continue
		}
		if m == nil {
			m = map[string]any{}
		}
		maps.Copy(m, r.Metadata)
	}
	return m
}

// quotaViolations returns whether any descriptor matched a quota-mode rule
// and the indices of those over their quota.
func quotaViolations(outs []outcome) (enabled bool, over []int) {
	for i := range outs {
		r := outs[i].rule
		if r == nil || !r.QuotaMode || r.ShadowMode || r.Unlimited {
			continue
		}
		enabled = true
		if outs[i].over {
			over = append(over, i)
		}
	}
	return enabled, over
}

// dynamicMetadata is the RLS response's dynamic_metadata: the passed
// descriptors' metadata and, when quota mode was in play, its two keys. Nil
// when empty, so a response without either carries none.
func dynamicMetadata(outs []outcome) *structpb.Struct {
	m := passedMetadata(outs)
	if enabled, over := quotaViolations(outs); enabled {
		if m == nil {
			m = map[string]any{}
		}
		list := make([]any, len(over))
		for i, x := range over {
			list[i] = float64(x)
		}
		m[QuotaModeEnabledKey] = true
		m[QuotaModeViolationsKey] = list
	}
	if m == nil {
		return nil
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		// The configuration checked every mapping (config.Rule.Metadata).
		return nil
	}
	return st
}
