// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/shard"
)

// plan says which policies are leased and which sharded (rate_limit.lease,
// rate_limit.shards): the server's store is lease.New(shard.NewFunc(store)),
// and both ask the plan in force.
type plan struct {
	leased map[sluice.Policy]bool
	shards map[sluice.Policy]int
}

// plans holds the plan in force.
type plans struct{ p atomic.Pointer[plan] }

func (ps *plans) leased(p sluice.Policy) bool {
	if pl := ps.p.Load(); pl != nil {
		return pl.leased[p]
	}
	return false
}

func (ps *plans) shards(p sluice.Policy) int {
	if pl := ps.p.Load(); pl != nil {
		return pl.shards[p]
	}
	return 1
}

// planOf returns the plan of c's rules, with prev's entries for policies
// c does not mention (so that requests still deciding with the previous
// configuration keep theirs while it is replaced) when prev is not nil.
func planOf(c *config.Config, prev *plan) *plan {
	pl := &plan{leased: map[sluice.Policy]bool{}, shards: map[sluice.Policy]int{}}
	if prev != nil {
		for p, v := range prev.leased {
			pl.leased[p] = v
		}
		for p, n := range prev.shards {
			pl.shards[p] = n
		}
	}
	for _, r := range c.Rules() {
		if r.Lease {
			pl.leased[r.Policy] = true
		}
		if r.Shards > 1 {
			pl.shards[r.Policy] = r.Shards
		}
	}
	return pl
}

// stack returns the server's store over store: leases over shards, as the
// plan in force says.
func (s *Server) stack(store sluice.Store) sluice.Store {
	s.leases = lease.New(shard.NewFunc(store, s.plan.shards), lease.WithPolicies(s.plan.leased))
	return s.leases
}

// allowAll is sluice.AllowAll, except that a request with one enforced
// descriptor asks its limiter alone (Limiter.AllowN), which is where leases
// decide locally and shards try each other. Several descriptors go to the
// store as one all-or-nothing batch, in which a leasing limiter takes from
// the store directly and a sharded one offers one of its shards.
func allowAll(ctx context.Context, checks []sluice.Check) (sluice.Result, error) {
	if len(checks) != 1 {
		return sluice.AllowAll(ctx, checks...)
	}
	c := checks[0]
	d, err := c.Limiter.AllowN(ctx, c.Key, c.Cost)
	res := sluice.Result{Allowed: d.Allowed, Refused: -1, Decisions: []sluice.Decision{d}}
	if !d.Allowed {
		res.Refused = 0
	}
	if err != nil && ctx.Err() != nil {
		res.Allowed, res.Refused = false, 0
		res.Decisions[0] = sluice.Decision{Limit: d.Limit}
	}
	return res, err
}

// reuse returns the limiter in force for a rule identical to r (same place,
// policy and options), if it holds leases: a reload then keeps the blocks
// it holds rather than abandoning them (their units would be refused to
// everyone until they lapse, a fixed window's until the window ends).
func (s *Server) reuse(r *config.Rule) *sluice.Limiter {
	if !r.Lease {
		return nil
	}
	prev := s.snap.Load()
	if prev == nil {
		return nil
	}
	for old, l := range prev.limiters {
		if old.Domain == r.Domain && old.FullKey == r.FullKey && old.Policy == r.Policy &&
			old.FailureMode == r.FailureMode && old.Lease && old.Shards == r.Shards {
			return l
		}
	}
	return nil
}

// releaseTimeout bounds the return of a replaced limiter's blocks.
const releaseTimeout = 2 * time.Second

// retire gives back the blocks of the leasing limiters of prev that next
// no longer uses (a reload changed their rules), for at most
// releaseTimeout: best effort, what is not returned lapses. A request still
// deciding with prev may take a new block meanwhile; that one lapses too.
func (s *Server) retire(prev, next *snapshot) {
	if prev == nil {
		return
	}
	kept := map[*sluice.Limiter]bool{}
	for _, l := range next.limiters {
		kept[l] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	for r, l := range prev.limiters {
		if !r.Lease || kept[l] {
			continue
		}
		if err := s.leases.ReleasePolicy(ctx, l.Policy()); err != nil {
			s.log.Warn("returning the leases of a replaced rule", "error", err)
			return
		}
	}
}

// ReleaseLeases gives back what the leasing rules in force hold unspent, so
// that other processes can use it at once: serve calls it when it stops.
func (s *Server) ReleaseLeases(ctx context.Context) error {
	sn := s.snap.Load()
	if sn == nil {
		return nil
	}
	for r, l := range sn.limiters {
		if !r.Lease {
			continue
		}
		if err := s.leases.ReleasePolicy(ctx, l.Policy()); err != nil {
			return err
		}
	}
	return nil
}
