// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
)

// In-flight rules. Besides rates, a rate_limit can bound how many requests
// are in flight at once (gateway mode only: Envoy's RLS has no call that
// ends a request, so a slot taken over RLS could never be given back):
//
//	rate_limit: {algorithm: concurrency, requests_per_unit: 20}
//	rate_limit: {algorithm: adaptive-concurrency, floor: 5, ceiling: 200}
//
// concurrency is a fixed limit of requests_per_unit (≥ 1) at once; no unit
// or period. adaptive-concurrency moves the limit between floor and ceiling
// (1 ≤ floor ≤ ceiling) with a controller of package adaptive: controller
// gradient (the default) or aimd, which needs latency_threshold (a Go
// duration: the latency that counts as overload); requests_per_unit must
// not be set. Both take optional holder_ttl (a Go
// duration, default inflight.DefaultTTL: how long a slot of a gateway
// that died stays taken) and critical_reserve (a fraction in [0, 1) of the
// limit kept for requests marked critical), and failure_mode. burst,
// unlimited and replaces do not apply.

// InFlight is an in-flight rule's limit.
type InFlight struct {
	// Limit is the fixed limit (0 when adaptive).
	Limit int64
	// Adaptive rules move the limit between Floor and Ceiling.
	Adaptive       bool
	Floor, Ceiling int64
	// TTL is how long a slot is held without an Extend.
	TTL time.Duration
	// Reserve is the fraction of the limit kept for critical requests.
	Reserve float64
	// Controller is "gradient" or "aimd" (adaptive rules).
	Controller string
	// Threshold is the aimd controller's overload latency.
	Threshold time.Duration
}

// The algorithm names of in-flight rules.
const (
	Concurrency         = "concurrency"
	AdaptiveConcurrency = "adaptive-concurrency"
)

func isInFlight(alg string) bool { return alg == Concurrency || alg == AdaptiveConcurrency }

// rawInFlight holds the in-flight fields as written.
type rawInFlight struct {
	floor, ceiling, ttl, reserve *yaml.Node
	controller, threshold        *yaml.Node
}

func (r rawInFlight) set() bool { return r.first() != nil }

func (r rawInFlight) first() *yaml.Node {
	for _, n := range []*yaml.Node{r.floor, r.ceiling, r.ttl, r.reserve, r.controller, r.threshold} {
		if n != nil {
			return n
		}
	}
	return nil
}

func (r rawInFlight) firstName() string {
	switch r.first() {
	case r.floor:
		return "floor"
	case r.ceiling:
		return "ceiling"
	case r.ttl:
		return "holder_ttl"
	case r.controller:
		return "controller"
	case r.threshold:
		return "latency_threshold"
	}
	return "critical_reserve"
}

// num records a field's node for inflightRule to decode.
func (p *parser) num(n *yaml.Node, field string) *yaml.Node { return p.deref(n) }

// inflightRule validates an in-flight rate_limit.
func (p *parser) inflightRule(r *rawLimit, field string, rule *Rule, nerr int) *Rule {
	at := func(n *yaml.Node) *yaml.Node {
		if n != nil {
			return n
		}
		return &yaml.Node{Line: r.line}
	}
	for _, x := range []struct {
		set   bool
		name  string
		where *yaml.Node
	}{
		{r.unit != "", "unit", r.unitNode},
		{r.period != "", "period", r.periodNode},
		{r.burstNode != nil, "burst", r.burstNode},
		{r.unlimited, "unlimited", nil},
		{len(r.replaces) > 0, "replaces", nil},
	} {
		if x.set {
			p.errorf(at(x.where), field+"."+x.name, "must not be set with algorithm %s", r.algorithm)
		}
	}
	f := &InFlight{TTL: inflight.DefaultTTL}
	const maxAdaptive = 1<<31 - 1 // the most an adaptive limit can be
	// floor and ceiling: whole numbers from 1 to maxAdaptive.
	whole := func(n *yaml.Node, name string) int64 {
		v, ok, over := p.wholeNumber(n, field+"."+name)
		if (ok || over) && !p.inRange(n, field+"."+name, v, over, 1, maxAdaptive, "") {
			return 0
		}
		return v
	}
	if r.algorithm == Concurrency {
		switch {
		case !r.hasRequests && r.requestsNode == nil:
			p.errorf(at(nil), field+".requests_per_unit", "missing: the most requests in flight at once")
		case r.hasRequests:
			p.inRange(r.requestsNode, field+".requests_per_unit", r.requests, r.requestsOver, 1, sluice.MaxLimit, "")
		}
		f.Limit = r.requests
		if r.inflight.floor != nil {
			p.errorf(r.inflight.floor, field+".floor", "only for algorithm adaptive-concurrency")
		}
		if r.inflight.ceiling != nil {
			p.errorf(r.inflight.ceiling, field+".ceiling", "only for algorithm adaptive-concurrency")
		}
		if r.inflight.controller != nil {
			p.errorf(r.inflight.controller, field+".controller", "only for algorithm adaptive-concurrency")
		}
		if r.inflight.threshold != nil {
			p.errorf(r.inflight.threshold, field+".latency_threshold", "only for algorithm adaptive-concurrency with controller aimd")
		}
	} else {
		f.Adaptive = true
		if r.requestsNode != nil {
			p.errorf(r.requestsNode, field+".requests_per_unit", "must not be set with algorithm adaptive-concurrency: set floor and ceiling")
		}
		if r.inflight.floor == nil {
			p.errorf(at(nil), field+".floor", "missing: the lowest limit of adaptive-concurrency")
		} else {
			f.Floor = whole(r.inflight.floor, "floor")
		}
		if r.inflight.ceiling == nil {
			p.errorf(at(nil), field+".ceiling", "missing: the highest limit of adaptive-concurrency")
		} else {
			f.Ceiling = whole(r.inflight.ceiling, "ceiling")
		}
		if f.Floor >= 1 && f.Ceiling >= 1 && f.Ceiling < f.Floor {
			p.errorf(r.inflight.ceiling, field+".ceiling", "%d: must be at least floor %d", f.Ceiling, f.Floor)
		}
		f.Controller = "gradient"
		if n := r.inflight.controller; n != nil {
			switch c := p.str(n, field+".controller"); c {
			case "gradient", "aimd":
				f.Controller = c
			case "":
			default:
				p.errorf(n, field+".controller", "%q: want gradient or aimd", c)
			}
		}
		if n := r.inflight.threshold; n != nil {
			s := p.str(n, field+".latency_threshold")
			d, err := time.ParseDuration(s)
			switch {
			case f.Controller != "aimd":
				p.errorf(n, field+".latency_threshold", "only with controller aimd")
			case s == "":
			case err != nil || d <= 0:
				p.errorf(n, field+".latency_threshold", "%q: want a positive duration such as 250ms", s)
			default:
				f.Threshold = d
			}
		} else if f.Controller == "aimd" {
			p.errorf(r.inflight.controller, field+".latency_threshold", "missing: controller aimd needs the latency that counts as overload")
		}
	}
	if n := r.inflight.ttl; n != nil {
		s := p.str(n, field+".holder_ttl")
		d, err := time.ParseDuration(s)
		switch {
		case s == "":
		case err != nil || d < time.Second:
			p.errorf(n, field+".holder_ttl", "%q: want a duration of at least 1s, such as 10s or 1m", s)
		default:
			f.TTL = d
		}
	}
	if n := r.inflight.reserve; n != nil {
		v, err := strconv.ParseFloat(n.Value, 64)
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!float" && n.Tag != "!!int") || err != nil || !(v >= 0 && v < 1) {
			p.errorf(n, field+".critical_reserve", "%s: want a fraction in [0, 1), such as 0.2", kindName(n))
		}
		f.Reserve = v
	}
	if len(p.errs) > nerr {
		return nil
	}
	rule.InFlight = f
	return rule
}
