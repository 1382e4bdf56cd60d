// SPDX-License-Identifier: Apache-2.0

package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/decide"
)

// Option configures an Interceptor.
type Option func(*Interceptor) error

// Method limits the calls of one method ("/pkg.Service/Method") or, with a
// trailing slash, of every method of a service ("/pkg.Service/"), with
// limits (and the Global ones), each call costing cost units, at least 1
// (New refuses 0, which would consume nothing and so limit nothing). An
// exact method wins over its service.
func Method(name string, cost int64, limits ...Limit) Option {
	return func(i *Interceptor) error {
		if !strings.HasPrefix(name, "/") || strings.Count(name, "/") != 2 || name == "//" {
			return fmt.Errorf("grpclimit: method %q: want \"/package.Service/Method\" or \"/package.Service/\"", name)
		}
		if _, dup := i.methods[name]; dup {
			return fmt.Errorf("grpclimit: method %q given twice", name)
		}
		i.methods[name] = &route{name: name, cost: cost, own: limits}
		return nil
	}
}

// Default limits the calls no Method matches with limits (and the Global
// ones), each costing cost units (at least 1). Without Default such calls face only the
// Global limits, at cost 1.
func Default(cost int64, limits ...Limit) Option {
	return func(i *Interceptor) error {
		if i.def != nil {
			return errors.New("grpclimit: Default given twice")
		}
		i.def = &route{cost: cost, own: limits}
		return nil
	}
}

// Global adds limits that apply to every call, at its method's cost.
func Global(limits ...Limit) Option {
	return func(i *Interceptor) error {
		i.global = append(i.global, limits...)
		return nil
	}
}

// DefaultMaxDelay is the longest a call is held for a leaky-bucket policy
// unless WithMaxDelay says otherwise.
const DefaultMaxDelay = decide.DefaultMaxDelay

// WithMaxDelay sets the longest a call is held for a leaky-bucket policy
// (DefaultMaxDelay unless set); a call that would wait longer is
// refused and takes no place in the queue. The bound is part of the one
// store call that admits the call: with D the maximum, T = Period/Limit
// and B the queue (Burst), a call of cost c is decided on the policy's
// state as if its queue were min(B, ⌊D/T⌋ + c), so it is admitted iff its
// queue delay is at most ⌊D/T⌋·T ≤ D (exactly D when D is a multiple of
// T). While the store fails, a limit that fails local (sluice.FailLocal)
// is bounded so on its local share, with the share's T and queue. The
// limit's policy must have a Name (New refuses one without, unless its
// queue is no longer than the cost).
func WithMaxDelay(d time.Duration) Option {
	return func(i *Interceptor) error {
		if d < 0 {
			return fmt.Errorf("grpclimit: WithMaxDelay: %v: must not be negative", d)
		}
		i.maxDelay = d
		return nil
	}
}

// WithRetryJitter adds a random duration in [0, max) to the RetryInfo of
// refusals, so that clients refused together do not all come back at once.
// The delay is never shorter than the real wait.
func WithRetryJitter(max time.Duration) Option {
	return func(i *Interceptor) error {
		if max < 0 {
			return fmt.Errorf("grpclimit: WithRetryJitter: %v: must not be negative", max)
		}
		i.jitter = max
		return nil
	}
}

// WithUnavailableRetryAfter sets the RetryInfo delay of the Unavailable
// error returned when the store fails and a limit fails closed (one second
// unless set).
func WithUnavailableRetryAfter(d time.Duration) Option {
	return func(i *Interceptor) error {
		if d <= 0 {
			return fmt.Errorf("grpclimit: WithUnavailableRetryAfter: %v: must be positive", d)
		}
		i.unavailable = d
		return nil
	}
}

// OnShadowRefusal calls f for each refusal of a shadow limit.
func OnShadowRefusal(f func(ctx context.Context, s ShadowRefusal)) Option {
	return func(i *Interceptor) error {
		i.onShadow = f
		return nil
	}
}

// OnError calls f with each store error.
func OnError(f func(ctx context.Context, fullMethod string, err error)) Option {
	return func(i *Interceptor) error {
		i.onError = f
		return nil
	}
}

// WithCriticalFunc makes the calls for which f reports true critical: they
// may take the slots an in-flight limit keeps in reserve
// (inflight.WithReserve). Without it no call is critical, whatever metadata
// it carries: a client cannot grant itself the reserve. f must be safe for
// concurrent use; CriticalFrom builds the usual one.
func WithCriticalFunc(f func(ctx context.Context, fullMethod string) bool) Option {
	return func(i *Interceptor) error {
		i.critical = f
		return nil
	}
}
