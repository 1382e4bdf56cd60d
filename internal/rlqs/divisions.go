// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"
)

// Division is a snapshot of one rule's limit for one bucket as this
// replica divides it, for a page or an API to show.
type Division struct {
	// Rule is the rule's full key; Bucket the bucket id.
	Rule   string
	Bucket map[string]string
	// Budget tokens per Fill: the rule's limit.
	Budget int64
	Fill   time.Duration
	// FleetDemand (requests per second) and FleetGrant (tokens per Fill)
	// sum every replica's streams, as this replica last read them.
	FleetDemand float64
	FleetGrant  int64
	// Replicas is the number of replicas whose streams report the bucket.
	Replicas int
	// Streams are this replica's streams that report the bucket (with
	// Divisions(perRule > 0), at most ShownStreams of them, those of
	// greatest demand); MoreStreams counts the others.
	Streams     []StreamShare
	MoreStreams int
	// Failing is set while the store fails (the rule's failure mode
	// decides).
	Failing bool
}

// StreamShare is one stream's demand and grant in a division.
type StreamShare struct {
	Stream string
	// Demand in requests per second, negative while unknown.
	Demand float64
	// Grant in tokens per Fill.
	Grant int64
}

// ShownStreams bounds the streams Divisions(perRule > 0) lists per
// division: every Envoy of a fleet may report one bucket (10,000 streams
// a replica).
const ShownStreams = 32

// Divisions returns the divisions this replica's streams take part in,
// sorted by rule and bucket key (a bucket's entries in key order, or its
// digest: see bucketKey). perRule > 0 keeps, of each rule's divisions, the
// perRule of greatest fleet demand (ties: by bucket key), so that what a
// caller shows (a page polled every second or two) costs what it shows,
// not what the fleet reports: a comparison is of keys of at most 64 bytes,
// and only the divisions kept are copied; it also keeps, of each of their
// streams, the ShownStreams of greatest demand (unknown last; ties: by
// stream), counting the others in MoreStreams.
func (s *Service) Divisions(perRule int) []Division {
	s.mu.Lock()
	defer s.mu.Unlock()
	type ref struct {
		dv     *division
		rule   string
		demand float64
	}
	refs := make([]ref, 0, len(s.divs))
	for _, dv := range s.divs {
		refs = append(refs, ref{dv, dv.rule.FullKey, dv.fleetDemand})
	}
	byKey := func(a, b ref) int {
		if c := strings.Compare(a.rule, b.rule); c != 0 {
			return c
		}
		return strings.Compare(a.dv.bucket, b.dv.bucket)
	}
	if perRule > 0 {
		slices.SortFunc(refs, func(a, b ref) int {
			if c := strings.Compare(a.rule, b.rule); c != 0 {
				return c
			}
			if c := cmp.Compare(b.demand, a.demand); c != 0 {
				return c
			}
			return strings.Compare(a.dv.bucket, b.dv.bucket)
		})
		kept, rule, n := refs[:0], "", 0
		for i, r := range refs {
			if i == 0 || r.rule != rule {
				rule, n = r.rule, 0
			}
			if n++; n <= perRule {
				kept = append(kept, r)
			}
		}
		refs = kept
	}
	slices.SortFunc(refs, byKey)
	out := make([]Division, 0, len(refs))
	for _, r := range refs {
		dv := r.dv
		d := Division{Rule: r.rule, Budget: dv.budget, Fill: dv.fill, FleetDemand: dv.fleetDemand,
			FleetGrant: dv.fleetGrant, Replicas: dv.replicas, Failing: dv.failing}
		for p := range dv.parts {
			if d.Bucket == nil {
				d.Bucket = maps.Clone(p.bucket.GetBucket())
			}
			d.Streams = append(d.Streams, StreamShare{Stream: p.st.id, Demand: p.demand, Grant: p.grant})
		}
		if perRule > 0 && len(d.Streams) > ShownStreams {
			slices.SortFunc(d.Streams, func(a, b StreamShare) int {
				if c := cmp.Compare(b.Demand, a.Demand); c != 0 {
					return c
				}
				return strings.Compare(a.Stream, b.Stream)
			})
			d.MoreStreams = len(d.Streams) - ShownStreams
			d.Streams = slices.Clip(d.Streams[:ShownStreams])
		}
		slices.SortFunc(d.Streams, func(a, b StreamShare) int { return strings.Compare(a.Stream, b.Stream) })
		out = append(out, d)
	}
	return out
}
