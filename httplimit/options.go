// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/decide"
)

// Option configures a Middleware.
type Option func(*config) error

type routeSpec struct {
	pattern string
	cost    int64
	limits  []Limit
	at      string // where Route was called (caller)
}

// caller returns where the user called the option that calls caller, as
// "file.go:line" (the file's base name: no paths of the machine that built
// it), or "" when unknown. Errors name it, as ServeMux names where a
// conflicting pattern was registered.
func caller() string {
	_, file, line, ok := runtime.Caller(2)
	if !ok {
		return ""
	}
	return filepath.Base(file) + ":" + strconv.Itoa(line)
}

type config struct {
	routes      []routeSpec
	def         *routeSpec
	global      []Limit
	maxDelay    time.Duration
	jitter      time.Duration
	unavailable time.Duration
	legacy      bool
	onShadow    func(*http.Request, ShadowRefusal)
	onError     func(*http.Request, error)
	critical    func(*http.Request) bool
	inflight    []inflightSpec // InFlight (inflight.go)
}

// Defaults of a Middleware.
const (
	// DefaultMaxDelay is the longest a request is held for a leaky-bucket
	// policy unless WithMaxDelay says otherwise.
	DefaultMaxDelay = decide.DefaultMaxDelay
	// DefaultUnavailableRetryAfter is the Retry-After of a 503 answered
	// because the store failed and a limit fails closed.
	DefaultUnavailableRetryAfter = time.Second
)

// Route limits the requests that match pattern, a Go 1.22 http.ServeMux
// pattern ("GET /items/{id}", "POST api.example.com/upload", "/static/"),
// with limits (and the Global ones); each such request costs cost units, at
// least 1 (New refuses 0, which would consume nothing and so limit
// nothing). When several patterns match a request, the most specific wins,
// as in a ServeMux.
func Route(pattern string, cost int64, limits ...Limit) Option {
	at := caller()
	return func(c *config) error {
		c.routes = append(c.routes, routeSpec{pattern, cost, limits, at})
		return nil
	}
}

// Default limits the requests no Route matches with limits (and the Global
// ones), each costing cost units (at least 1). Without Default, such requests face only
// the Global limits, at cost 1.
func Default(cost int64, limits ...Limit) Option {
	return func(c *config) error {
		if c.def != nil {
			return errors.New("httplimit: Default given twice")
		}
		c.def = &routeSpec{cost: cost, limits: limits}
		return nil
	}
}

// Global adds limits that apply to every request, at its route's cost.
func Global(limits ...Limit) Option {
	return func(c *config) error {
		c.global = append(c.global, limits...)
		return nil
	}
}

// WithMaxDelay sets the longest a request is held for a leaky-bucket
// policy (DefaultMaxDelay unless set). A request whose queue delay would be
// longer is refused with a Retry-After after which it would not be, and
// takes no place in the queue. The bound is part of the one store call
// that admits the request, so requests arriving together cannot all pass
// it: with D the maximum, T = Period/Limit and B the queue (Burst), a
// request of cost c is decided on the policy's state as if its queue were
//
//	min(B, ⌊D/T⌋ + c)
//
// and is admitted iff its queue delay is at most ⌊D/T⌋·T: exactly D when
// D is a multiple of T (a delay of D is admitted, one a nanosecond longer
// refused), otherwise less than one interval T shorter, never longer. For
// such a policy RateLimit-Policy advertises q = min(B, ⌊D/T⌋ + 1), the
// requests of cost 1 an idle key admits within D, and RateLimit's r is
// what still fits within D. While the store fails, a limit that fails
// local (sluice.FailLocal) is bounded so on its local share, with the
// share's T and queue, and a refusal takes no place there either. The
// limit's policy must have a Name (New refuses one without, unless its
// queue is no longer than the cost).
func WithMaxDelay(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("httplimit: WithMaxDelay: %v: must not be negative", d)
		}
		c.maxDelay = d
		return nil
	}
}

// WithRetryJitter adds a random duration in [0, max) to the Retry-After of
// refusals, so that clients refused together do not all come back in the
// same second. Retry-After is never earlier than the real wait.
func WithRetryJitter(max time.Duration) Option {
	return func(c *config) error {
		if max < 0 {
			return fmt.Errorf("httplimit: WithRetryJitter: %v: must not be negative", max)
		}
		c.jitter = max
		return nil
	}
}

// WithUnavailableRetryAfter sets the Retry-After of the 503 answered when
// the store fails and a limit fails closed (DefaultUnavailableRetryAfter
// unless set).
func WithUnavailableRetryAfter(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("httplimit: WithUnavailableRetryAfter: %v: must be positive", d)
		}
		c.unavailable = d
		return nil
	}
}

// WithLegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (in seconds) to limited responses, describing the most
// constrained policy, for clients that predate the RateLimit headers.
func WithLegacyHeaders() Option {
	return func(c *config) error {
		c.legacy = true
		return nil
	}
}

// OnShadowRefusal calls f for each refusal of a shadow limit, before the
// request proceeds. f must be safe for concurrent use and quick.
func OnShadowRefusal(f func(r *http.Request, s ShadowRefusal)) Option {
	return func(c *config) error {
		c.onShadow = f
		return nil
	}
}

// OnError calls f with each store error (the request is then admitted or
// answered 503 as the failure modes say). f must be safe for concurrent
// use and quick.
func OnError(f func(r *http.Request, err error)) Option {
	return func(c *config) error {
		c.onError = f
		return nil
	}
}

// WithCriticalFunc makes the requests for which f reports true critical:
// they may take the slots an in-flight limit keeps in reserve
// (inflight.WithReserve). Without it no request is critical, whatever it
// carries: a client cannot grant itself the reserve. f must be safe for
// concurrent use; CriticalFrom builds the usual one.
func WithCriticalFunc(f func(r *http.Request) bool) Option {
	return func(c *config) error {
		c.critical = f
		return nil
	}
}
