// SPDX-License-Identifier: Apache-2.0

package server

import (
	"slices"
	"strings"
)

// RLQSDivision is one bucket of a rule as this replica divides its limit
// among the RLQS streams (Envoys) that report it (rlqs.Service.Divisions);
// a rule lists at most RLQSDivisionsPerRule, those of greatest fleet
// demand, in the order of their bucket keys (rlqs.Service.Divisions).
type RLQSDivision struct {
	// Bucket is the bucket id's entries, "key=value" joined by commas in
	// key order; a value longer than NearLimitValueBytes is cut as the
	// near-limit keys' are.
	Bucket string `json:"bucket"`
	// Budget tokens per FillSeconds: the rule's limit.
	Budget      int64   `json:"budget"`
	FillSeconds float64 `json:"fill_seconds"`
	// FleetDemand (requests per second) and FleetGrant (tokens per
	// FillSeconds) sum every replica's streams, as this replica last read
	// them from the store.
	FleetDemand float64 `json:"fleet_demand"`
	FleetGrant  int64   `json:"fleet_grant"`
	// Replicas is the number of sluice replicas whose streams report the
	// bucket.
	Replicas int `json:"replicas"`
	// Failing is set while the store fails (the rule's failure mode
	// decides the assignments).
	Failing bool `json:"failing,omitempty"`
	// Streams are this replica's streams that report the bucket, at most
	// rlqs.ShownStreams of them, those of greatest demand; MoreStreams
	// counts the others.
	Streams     []RLQSStream `json:"streams"`
	MoreStreams int          `json:"more_streams,omitempty"`
}

// RLQSStream is one stream's demand and assignment in a division.
type RLQSStream struct {
	Stream string `json:"stream"`
	// Demand is the stream's reported demand in requests per second; null
	// until its second report.
	Demand *float64 `json:"demand"`
	// Grant is its assigned rate, tokens per the division's FillSeconds.
	Grant int64 `json:"grant"`
}

// RLQSDivisionsPerRule bounds the divisions GET /v1/rules lists per rule:
// those of greatest fleet demand (rlqs.Service.Divisions). A replica may
// divide millions of buckets (10,000 streams of up to 1,000 buckets each);
// the page shows the hot ones, and the answer grows with what it shows.
const RLQSDivisionsPerRule = 100

// rlqsDivisions returns the RLQS service's divisions by rule full key, at
// most RLQSDivisionsPerRule of each rule.
func (s *Server) rlqsDivisions() map[string][]RLQSDivision {
	if s.rlqs == nil {
		return nil
	}
	divs := s.rlqs.Divisions(RLQSDivisionsPerRule)
	if len(divs) == 0 {
		return nil
	}
	out := map[string][]RLQSDivision{}
	for _, d := range divs {
		keys := make([]string, 0, len(d.Bucket))
		for k := range d.Bucket {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(cut(k, NearLimitValueBytes))
			b.WriteByte('=')
			b.WriteString(cut(d.Bucket[k], NearLimitValueBytes))
		}
		v := RLQSDivision{Bucket: b.String(), Budget: d.Budget, FillSeconds: d.Fill.Seconds(), FleetDemand: d.FleetDemand,
			FleetGrant: d.FleetGrant, Replicas: d.Replicas, Failing: d.Failing, Streams: make([]RLQSStream, 0, len(d.Streams)), MoreStreams: d.MoreStreams}
		for _, st := range d.Streams {
			rs := RLQSStream{Stream: st.Stream, Grant: st.Grant}
			if st.Demand >= 0 {
				dem := st.Demand
				rs.Demand = &dem
			}
			v.Streams = append(v.Streams, rs)
		}
		out[d.Rule] = append(out[d.Rule], v)
	}
	return out
}
