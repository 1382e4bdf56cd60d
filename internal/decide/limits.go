// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/storeeq"
)

// Spec is one limit of a route as a front end configured it.
type Spec struct {
	Limiter *sluice.Limiter
	Keyed   bool // it has a key function
	// NoKey, when set, says why the key function keys no request: it was
	// made from an empty name (`Header("") or a name of spaces: ...`).
	NoKey  string
	Shadow bool
}

// Order checks the limits of one route, named by route ("route \"GET
// /x\"", "Default"), whose requests cost cost: the Global limits of the
// front end first (nGlobal of them), then the route's own. A front end
// checks its Global limits alone first, with route "" and cost 1, so that
// a mistake in one is blamed on Global, not on a route it was added to. It
// returns their indexes in specs, the enforced ones first, and how many are
// enforced. An error names the route (unless ""), the limit (as "Global
// limit i" or "limit i", its index where it was given), the field and the
// value. An enforced leaky-bucket policy must have a Name unless its queue
// is no longer than cost (no request ever waits there): Decide bounds a
// request's delay under another burst, on the state that policies of one
// Name share.
func Order(route string, cost int64, nGlobal int, specs []Spec) (order []int, enforced int, err error) {
	if route != "" {
		route += ": "
	}
	if cost < 1 {
		// A cost of 0 would only peek: nothing consumed, nothing limited.
		return nil, 0, fmt.Errorf("%scost %d: must be at least 1 (a request of cost 0 would consume nothing)", route, cost)
	}
	name := func(i int) string { return Name(i, nGlobal) }
	seen := map[string]int{}
	for i, s := range specs {
		if s.Limiter == nil {
			return nil, 0, fmt.Errorf("%s%s: Limiter is nil", route, name(i))
		}
		if s.Limiter.Store() == nil {
			return nil, 0, fmt.Errorf("%s%s: the Limiter has no store (make it with sluice.NewLimiter)", route, name(i))
		}
		if !s.Keyed {
			return nil, 0, fmt.Errorf("%s%s: Key is nil", route, name(i))
		}
		if s.NoKey != "" {
			return nil, 0, fmt.Errorf("%s%s: Key %s", route, name(i), s.NoKey)
		}
		p := s.Limiter.Policy()
		if j, dup := seen[p.Name]; dup && p.Name == "" {
			return nil, 0, fmt.Errorf("%s%s: policy Name is empty, as is %s's: name them apart (a refusal names the violated policy)", route, name(i), name(j))
		} else if dup {
			return nil, 0, fmt.Errorf("%s%s: policy Name %q is already used by %s: each limit of a route needs its own", route, name(i), p.Name, name(j))
		}
		seen[p.Name] = i
		if capacity := p.Capacity(); cost > capacity {
			return nil, 0, fmt.Errorf("%s%s: cost %d exceeds the capacity %d of policy %q: no request could ever be admitted", route, name(i), cost, capacity, p.Name)
		} else if p.Algorithm == sluice.LeakyBucket && p.Name == "" && !s.Shadow && cost < capacity {
			// Its delay bound is decided under another burst (Decide), on
			// the state that policies of one Name share.
			return nil, 0, fmt.Errorf("%s%s: policy %v has no Name: a leaky-bucket request's longest delay is decided on the state of a named policy (set Policy.Name)", route, name(i), p)
		}
	}
	// The enforced limits are decided in one AllowAll batch, all or
	// nothing: on one store.
	first := -1
	for i, s := range specs {
		if s.Shadow {
			continue
		}
		if first < 0 {
			first = i
		} else if !storeeq.Same(s.Limiter.Store(), specs[first].Limiter.Store()) {
			return nil, 0, fmt.Errorf("%s%s: its Limiter's store is not %s's: a route's limits are decided all-or-nothing, on one store", route, name(i), name(first))
		}
	}
	for shadow := range 2 {
		for i, s := range specs {
			if s.Shadow == (shadow == 1) {
				order = append(order, i)
			}
		}
		if shadow == 0 {
			enforced = len(order)
		}
	}
	return order, enforced, nil
}

// Name returns the name Order gives limit i of a route with nGlobal Global
// limits, for a front end's own checks.
func Name(i, nGlobal int) string {
	if i < nGlobal {
		return fmt.Sprintf("Global limit %d", i)
	}
	return fmt.Sprintf("limit %d", i-nGlobal)
}
