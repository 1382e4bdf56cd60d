// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"context"
	"math"
	"sort"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/sluicehq/sluice"
)

// The division round: every tick, each division's budget is divided
// among the streams that report its bucket (across replicas, through the
// board), and the assignments that changed are sent.

// loop ticks while streams are open.
func (s *Service) loop() {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for range t.C {
		if !s.tickOnce() {
			return
		}
	}
}

// tickOnce re-divides every division with streams here and refreshes
// static assignments; false once no stream is open.
func (s *Service) tickOnce() bool {
	now := time.Now()
	cfg := s.config()
	s.mu.Lock()
	if len(s.streams) == 0 {
		s.ticking = false
		s.mu.Unlock()
		return false
	}
	sends := map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction{}
	if cfg != nil && cfg != s.placed {
		s.placed = cfg
		s.rematch(cfg, now, sends)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.tick)
	for _, dv := range s.divs {
		s.divide(ctx, dv, now, sends)
	}
	cancel()
	for st := range s.streams {
		for _, p := range st.parts {
			if p.div == nil && now.Sub(p.issuedAt) >= s.ttl/2 {
				sends[st] = append(sends[st], s.issueStatic(p, now))
			}
		}
	}
	s.mu.Unlock()
	s.deliver(nil, sends)
	return true
}

// divide re-divides dv and adds the assignments that changed or need
// refreshing to sends. Called with s.mu held.
func (s *Service) divide(ctx context.Context, dv *division, now time.Time, sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction) {
	entries, err := s.board.Read(ctx, dv.key, now)
	if err != nil {
		s.failed(dv, now, err, sends)
		return
	}
	// The board's records, with this replica's fresh demands.
	idx := make(map[string]int, len(entries))
	for i, e := range entries {
		idx[e.Stream] = i
	}
	for p := range dv.parts {
		if i, ok := idx[p.st.id]; ok {
			entries[i].Demand = p.demand
			continue
		}
		idx[p.st.id] = len(entries)
		entries = append(entries, Entry{Stream: p.st.id, Demand: p.demand})
	}
	wants := make([]int64, len(entries))
	ids := make([]string, len(entries))
	for i, e := range entries {
		wants[i] = want(e.Demand, int64(dv.fill/time.Second))
		ids[i] = e.Stream
	}
	targets := Divide(dv.budget, wants, ids)
	parts := make([]*part, 0, len(dv.parts))
	claims := make([]Claim, 0, len(dv.parts))
	for p := range dv.parts {
		w := s.wantFor(p, targets[idx[p.st.id]], now)
		parts = append(parts, p)
		claims = append(claims, Claim{Stream: p.st.id, Demand: p.demand, Want: w})
	}
	// Decreases first, so that increases in the same call can use them.
	order := make([]int, len(claims))
	for i := range order {
		order[i] = i
	}
	dec := func(i int) bool { return parts[i].sent == tokens && claims[i].Want < parts[i].grant }
	sort.SliceStable(order, func(a, b int) bool { return dec(order[a]) && !dec(order[b]) })
	oc := make([]Claim, len(order))
	for i, j := range order {
		oc[i] = claims[j]
	}
	grants, err := s.board.Claim(ctx, dv.key, dv.budget, now, s.ttl, oc)
	if err != nil {
		s.failed(dv, now, err, sends)
		return
	}
	if dv.failing {
		dv.failing = false
		s.log.Info("rlqs: the store answers again; dividing", "rule", dv.rule.FullKey)
	}
	var fleetDemand float64
	var fleetGrant, held int64
	replicas := map[string]bool{}
	for i, j := range order {
		p := parts[j]
		entries[idx[p.st.id]].Grant = grants[i]
		held += grants[i]
		s.assign(p, grants[i], now, sends)
	}
	for _, e := range entries {
		if e.Demand > 0 {
			fleetDemand += e.Demand
		}
		fleetGrant += e.Grant
		replicas[replicaOf(e.Stream)] = true
	}
	dv.fleetDemand, dv.fleetGrant, dv.replicas = fleetDemand, fleetGrant, max(len(replicas), 1)
	dv.held = held
}

// wantFor is what p claims given its target: the target for a first
// assignment; otherwise its current grant while it changed less than a
// tick ago or the target is within a sixteenth of it (no flapping), else
// the target.
func (s *Service) wantFor(p *part, target int64, now time.Time) int64 {
	if p.sent != tokens {
		return target
	}
	if now.Sub(p.changed) < s.tick {
		return p.grant
	}
	d := target - p.grant
	if d < 0 {
		d = -d
	}
	if target != 0 && p.grant != 0 && d*16 <= p.grant {
		return p.grant
	}
	return target
}

// assign issues p a token bucket of grant tokens per fill interval if it
// changed or its last assignment is half through its TTL.
func (s *Service) assign(p *part, grant int64, now time.Time, sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction) {
	dv := p.div
	changed := p.sent != tokens || p.grant != grant
	if !changed && now.Sub(p.issuedAt) < s.ttl/2 {
		return
	}
	if changed {
		p.changed = now
	}
	p.sent, p.grant, p.issuedAt = tokens, grant, now
	sends[p.st] = append(sends[p.st], tokenBucket(p.bucket, grant, maxTokens(grant, dv.fill, s.burst), dv.fill, s.ttl))
}

// maxTokens is the bucket size of a share: its rate over the burst window,
// rounded up, at least 1 (0 for no share).
func maxTokens(grant int64, fill, burst time.Duration) int64 {
	if grant <= 0 {
		return 0
	}
	m := int64(math.Ceil(float64(grant) * float64(burst) / float64(fill)))
	return min(max(m, 1), math.MaxUint32)
}

// failed applies dv's rule's failure mode after a store error.
func (s *Service) failed(dv *division, now time.Time, err error, sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction) {
	s.stats.storeErrors.Add(1)
	if !dv.failing {
		dv.failing = true
		s.log.Warn("rlqs: the store failed; the rule's failure mode decides until it answers", "rule", dv.rule.FullKey, "failure_mode", dv.rule.FailureMode, "error", err)
	}
	switch dv.rule.FailureMode {
	case sluice.FailOpen, sluice.FailClosed:
		allow := dv.rule.FailureMode == sluice.FailOpen
		k := denyAll
		if allow {
			k = allowAll
		}
		for p := range dv.parts {
			if p.sent != k || now.Sub(p.issuedAt) >= s.ttl/2 {
				p.sent, p.issuedAt = k, now
				sends[p.st] = append(sends[p.st], blanket(p.bucket, allow, s.ttl))
			}
		}
	default: // FailLocal
		s.divideLocal(dv, now, sends)
	}
}

// divideLocal divides, while the store fails, what this replica's streams
// held at its last claim (dv.held, at most the budget) among them as the
// board would: targets from Divide, wantFor's hysteresis, decreases
// before increases, and each stream gets at most that share less the
// grants in force of this replica's other streams, so that those never sum
// past it. A stream that joins gets what the others do not hold (0 if they
// hold it all) until they are lowered. Called with s.mu held.
func (s *Service) divideLocal(dv *division, now time.Time, sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction) {
	budget := min(dv.held, dv.budget)
	parts := make([]*part, 0, len(dv.parts))
	for p := range dv.parts {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].st.id < parts[j].st.id })
	wants := make([]int64, len(parts))
	ids := make([]string, len(parts))
	var inForce int64 // the grants in force of dv's streams here
	for i, p := range parts {
		wants[i] = want(p.demand, int64(dv.fill/time.Second))
		ids[i] = p.st.id
		if p.sent == tokens {
			inForce += p.grant
		}
	}
	targets := Divide(budget, wants, ids)
	claims := make([]int64, len(parts))
	for i, p := range parts {
		claims[i] = s.wantFor(p, targets[i], now)
	}
	current := func(i int) int64 {
		if parts[i].sent == tokens {
			return parts[i].grant
		}
		return 0
	}
	order := make([]int, len(parts))
	for i := range order {
		order[i] = i
	}
	dec := func(i int) bool { return claims[i] < current(i) }
	sort.SliceStable(order, func(a, b int) bool { return dec(order[a]) && !dec(order[b]) })
	for _, i := range order {
		cur := current(i)
		g := max(min(claims[i], budget-(inForce-cur)), 0)
		inForce += g - cur
		s.assign(parts[i], g, now, sends)
	}
}

// issueStatic issues a bucket sluice does not divide its blanket rule.
func (s *Service) issueStatic(p *part, now time.Time) *rlqspb.RateLimitQuotaResponse_BucketAction {
	p.sent, p.issuedAt = p.static, now
	return blanket(p.bucket, p.static == allowAll, s.ttl)
}

func replicaOf(stream string) string {
	for i := len(stream) - 1; i >= 0; i-- {
		if stream[i] == '/' {
			return stream[:i]
		}
	}
	return stream
}
