// SPDX-License-Identifier: Apache-2.0

package server

import (
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
// so that the caller can pick, say, a backend that still has quota. As
// there (mergeMetadata), the first descriptor to set a key keeps it, and
// where two set it to mappings those are merged key by key the same way.
// It returns nil when there is nothing to say.
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
		mergeFirst(m, r.Metadata)
	}
	return m
}

// mergeFirst adds to dst the keys of src it lacks, and merges a mapping of
// src into a mapping dst has under the same key; any other value dst has
// stays. A mapping it adds or merges into is a copy: the rules' metadata
// is never written.
func mergeFirst(dst, src map[string]any) {
	for k, v := range src {
		sv, sok := v.(map[string]any)
		dv, ok := dst[k]
		switch {
		case !ok && sok:
			c := make(map[string]any, len(sv))
			mergeFirst(c, sv)
			dst[k] = c
		case !ok:
			dst[k] = v
		default:
			if dm, dok := dv.(map[string]any); dok && sok {
				mergeFirst(dm, sv)
			}
		}
	}
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
