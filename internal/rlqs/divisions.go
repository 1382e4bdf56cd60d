// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"sort"
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
	// Streams are this replica's streams that report the bucket.
	Streams []StreamShare
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

// Divisions returns the divisions this replica's streams take part in,
// sorted by rule and bucket.
func (s *Service) Divisions() []Division {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Division, 0, len(s.divs))
	for _, dv := range s.divs {
		d := Division{Rule: dv.rule.FullKey, Budget: dv.budget, Fill: dv.fill, FleetDemand: dv.fleetDemand,
			FleetGrant: dv.fleetGrant, Replicas: dv.replicas, Failing: dv.failing}
		for p := range dv.parts {
			if d.Bucket == nil {
				d.Bucket = make(map[string]string, len(p.bucket.GetBucket()))
				for k, v := range p.bucket.GetBucket() {
					d.Bucket[k] = v
				}
			}
			d.Streams = append(d.Streams, StreamShare{Stream: p.st.id, Demand: p.demand, Grant: p.grant})
		}
		sort.Slice(d.Streams, func(i, j int) bool { return d.Streams[i].Stream < d.Streams[j].Stream })
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Rule+"\x00"+bucketKey(out[i].Bucket), out[j].Rule+"\x00"+bucketKey(out[j].Bucket)
		return a < b
	})
	return out
}
