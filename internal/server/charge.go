// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/decide"
)

// countRefused records the hits of a refused request on its enforced
// descriptors whose rule says count_refused, past the limit (a charge), as
// envoyproxy/ratelimit counts every hit: Envoy's check-then-debit pattern
// (a check with hits_addend 0, a debit of the tokens on stream done)
// limits a budget only if the debit that goes over is recorded. The
// descriptor stays as the take decided it (over, or not when another
// descriptor refused the request); its decision is the key's state after
// the charge. It returns check's error when the caller has gone; fail
// counts a store failure (once per request).
func (s *Server) countRefused(ctx context.Context, label string, descs []descriptor, outs []outcome, limiters []*sluice.Limiter, fail func(error, []int)) error {
	for i := range outs {
		r := outs[i].rule
		if r == nil || !r.CountRefused || r.Unlimited || r.ShadowMode || r.Deny || limiters[i] == nil || descs[i].hits <= 0 {
			continue
		}
		d, err := limiters[i].Charge(ctx, storeKey(r, descs[i].entries), descs[i].hits)
		if v := decide.Classify(ctx, nil, sluice.Result{}, err); v.Outcome == decide.Gone {
			return s.gone(label, descs, outs, ctx.Err())
		}
		if err != nil {
			fail(err, []int{i})
			outs[i].failed = true
			continue
		}
		d.Allowed = !outs[i].over
		outs[i].decision = d
	}
	return nil
}
