// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"context"
	"math"
	"sort"
	"sync"
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

// tickOnce re-divides every division with streams here, refreshes static
// assignments and abandons idle buckets; false once no stream is open.
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
	var drops []record
	if cfg != nil && cfg != s.placed {
		s.placed = cfg
		drops = s.rematch(cfg, now, sends, drops)
	}
	for st := range s.streams {
		for key, at := range st.abandoned {
			if now.Sub(at) >= s.ttl {
				delete(st.abandoned, key)
			}
		}
		for key, p := range st.parts {
			switch {
			case now.Sub(p.used) >= idleTTLs*s.ttl:
				// Idle: Envoy forgets it, and its next request makes it
				// anew (a first report; a report of no requests crossing
				// the abandon does not: report).
				sends[st] = append(sends[st], abandon(p.bucket))
				drops = s.leave(p, drops, time.Now())
				delete(st.parts, key)
				if st.abandoned == nil {
					st.abandoned = map[string]time.Time{}
				}
				st.abandoned[key] = now
			case p.div == nil && now.Sub(p.issuedAt) >= s.ttl/2:
				sends[st] = append(sends[st], s.issueStatic(p, now))
			}
		}
	}
	divs := make([]*division, 0, len(s.divs))
	for _, dv := range s.divs {
		divs = append(divs, dv)
	}
	s.mu.Unlock()
	if len(drops) > 0 {
		go s.dropRecords(drops)
	}
	deliver(sends) // decided before the rounds, so put before theirs
	s.rounds(divs, now, false)
	return true
}

// rounds runs a round of each division, at once (at most maxRounds at a
// time), and delivers each one's assignments before the next round of its
// division can start, so that a stream's outbox gets a division's
// assignments in the order they were decided. Each round has its own
// deadline, one tick C after it starts (its wait for one of the maxRounds
// slots included), so a round ends within a tick and a healthy store's
// latency is paid once per maxRounds divisions, not once per division.
// wait: a division whose round is in progress is waited for (a report:
// its new streams need their first assignment); else it is skipped (a
// tick: the round in progress divides it). Called without s.mu.
func (s *Service) rounds(divs []*division, now time.Time, wait bool) {
	var wg sync.WaitGroup
	for _, dv := range divs {
		if wait {
			dv.round <- struct{}{}
		} else {
			select {
			case dv.round <- struct{}{}:
			default:
				continue
			}
		}
		wg.Go(func() {
			defer func() { <-dv.round }()
			ctx, cancel := context.WithTimeout(context.Background(), s.tick)
			defer cancel()
			own := map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction{}
			select {
			case s.slots <- struct{}{}:
				s.round(ctx, dv, now, own)
				<-s.slots
			case <-ctx.Done():
				s.mu.Lock()
				s.failed(dv, now, ctx.Err(), own)
				s.mu.Unlock()
			}
			deliver(own) // before dv.round is released (deferred above)
		})
	}
	wg.Wait()
}

// round re-divides dv and adds the assignments that changed or need
// refreshing to sends: it reads the division's records, claims for this
// replica's streams of it, and assigns the grants. Called holding
// dv.round, without s.mu, which it holds only between its board calls.
func (s *Service) round(ctx context.Context, dv *division, now time.Time, sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction) {
	entries, err := s.board.Read(ctx, dv.key, now)
	s.mu.Lock()
	if err != nil {
		s.failed(dv, now, err, sends)
		s.mu.Unlock()
		return
	}
	// The board's records, with this replica's fresh demands; a silent
	// part wants nothing and claims nothing.
	idx := make(map[string]int, len(entries))
	for i, e := range entries {
		idx[e.Stream] = i
	}
	silent := map[string]bool{}
	for p := range dv.parts {
		if s.silent(p, now) {
			silent[p.st.id] = true
			continue
		}
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
		if !silent[e.Stream] {
			wants[i] = want(e.Demand, int64(dv.fill/time.Second))
		}
		ids[i] = e.Stream
	}
	budget, fill := dv.budget, dv.fill
	targets := Divide(budget, wants, ids)
	parts := make([]*part, 0, len(dv.parts))
	claims := make([]Claim, 0, len(dv.parts))
	for p := range dv.parts {
		if silent[p.st.id] {
			continue
		}
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
	s.mu.Unlock()
	// The claim's time is read now, after every part it claims for was
	// made: a record it writes expires after any that a leave before it
	// drops (leave).
	claimed := time.Now()
	if claimed.Before(now) {
		claimed = now
	}
	var grants []int64
	if len(oc) > 0 {
		grants, err = s.board.Claim(ctx, dv.key, budget, claimed, s.ttl, oc)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
	var drops []record
	for i, j := range order {
		p := parts[j]
		entries[idx[p.st.id]].Grant = grants[i]
		if p.div != dv {
			// p left while the claim was made, which may have written
			// its record again after leave's drop: drop it again.
			drops = append(drops, record{dv.key, p.st.id, claimed.Add(s.ttl)})
			continue
		}
		held += grants[i]
		s.assign(p, grants[i], fill, now, sends)
	}
	if len(drops) > 0 {
		go s.dropRecords(drops)
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

// silent reports whether p's stream has not reported it for silentTTLs
// assignment TTLs: it then claims nothing and is not re-issued, so its
// record lives out its TTL (A after its last claim) and the others may
// claim its share then, when its Envoy's assignment (issued at that claim
// at the latest) has expired too; from then on it holds nothing. Called
// with s.mu held.
func (s *Service) silent(p *part, now time.Time) bool {
	if now.Sub(p.heard) < silentTTLs*s.ttl {
		return false
	}
	if p.sent != none && now.Sub(p.issuedAt) >= s.ttl {
		p.sent = none
	}
	return true
}

// wantFor is what p claims given its target: the target for a first
// assignment; otherwise its current grant while it changed less than a
// tick ago or the target is within a sixteenth of it (no flapping), else
// the target.
func (s *Service) wantFor(p *part, target int64, now time.Time) int64 {
	if p.sent != tokens || p.fill != p.div.fill {
		return target // a first assignment, or one in another fill's units
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
// changed (its grant or its fill: a reload may change the period alone) or
// its last assignment is half through its TTL.
func (s *Service) assign(p *part, grant int64, fill time.Duration, now time.Time, sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction) {
	changed := p.sent != tokens || p.grant != grant || p.fill != fill
	if !changed && now.Sub(p.issuedAt) < s.ttl/2 {
		return
	}
	if changed {
		p.changed = now
	}
	p.sent, p.grant, p.fill, p.issuedAt = tokens, grant, fill, now
	sends[p.st] = append(sends[p.st], tokenBucket(p.bucket, grant, maxTokens(grant, fill, s.burst), fill, s.ttl))
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
			if s.silent(p, now) {
				continue
			}
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
// hold it all) until they are lowered; a silent one gets nothing, and its
// grant counts while it is in force. Called with s.mu held.
func (s *Service) divideLocal(dv *division, now time.Time, sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction) {
	budget := min(dv.held, dv.budget)
	parts := make([]*part, 0, len(dv.parts))
	var inForce int64 // the grants in force of dv's streams here
	for p := range dv.parts {
		if !s.silent(p, now) {
			parts = append(parts, p)
		} else if p.sent == tokens {
			inForce += p.grant
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].st.id < parts[j].st.id })
	wants := make([]int64, len(parts))
	ids := make([]string, len(parts))
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
		s.assign(parts[i], g, dv.fill, now, sends)
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
