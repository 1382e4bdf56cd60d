// SPDX-License-Identifier: Apache-2.0

package server

import (
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/internal/config"
)

// In-flight rules in gateway mode (config's algorithm concurrency and
// adaptive-concurrency):
//
//	- key: route                       # at most 20 requests of this route
//	  value: GET /v1/reports           # in flight at once, over every
//	  rate_limit: {algorithm: concurrency, requests_per_unit: 20}  # gateway (503)
//	  descriptors:
//	    - key: remote_address          # and at most 2 per client (429)
//	      rate_limit: {algorithm: concurrency, requests_per_unit: 2}
//	- key: header:X-Api-Key            # per API key on every route,
//	  rate_limit: {algorithm: adaptive-concurrency, floor: 2, ceiling: 50}
//
// A slot is held until the upstream has answered, with the rule's
// holder_ttl (default inflight.DefaultTTL), extended every third of it
// while the request runs, so the slots of a gateway that dies come back
// within holder_ttl. Every gateway sharing the store enforces the same
// limit. Envoy's RLS has no call that ends a request, so over RLS and the
// JSON API these rules limit nothing: a descriptor that matches one is
// answered as if no rule matched. shadow_mode is not supported on them
// (logged; the rule is enforced).

func isRoute(e config.Entry) bool {
	return e.Key == "route" && e.Value != "" && !strings.HasSuffix(e.Value, "*")
}

// inflightPattern is the route pattern of an in-flight rule, or "".
func inflightPattern(r *config.Rule) string {
	switch {
	case len(r.Path) == 1 && isRoute(r.Path[0]):
		return r.Path[0].Value
	case len(r.Path) == 2 && isRoute(r.Path[0]):
		return r.Path[0].Value
	}
	return ""
}

// inflightOption compiles an in-flight rule into an httplimit option, or
// nil (logged) when it cannot apply.
func (g *Gateway) inflightOption(r *config.Rule) httplimit.Option {
	if r.ShadowMode || g.s.shadowAll {
		g.s.log.Warn("gateway: shadow_mode is not supported on in-flight rules; the rule is enforced", "rule", r.FullKey, "file", r.File, "line", r.Line)
	}
	sem, ok := g.s.base.(inflight.Semaphore)
	if !ok {
		g.s.log.Warn("gateway: in-flight rule ignored: the store cannot hold in-flight limits", "rule", r.FullKey, "file", r.File, "line", r.Line)
		return nil
	}
	opts := []inflight.Option{inflight.WithTTL(r.InFlight.TTL), inflight.WithReserve(r.InFlight.Reserve), inflight.WithFailureMode(r.FailureMode)}
	if local, ok := g.s.local.(inflight.Semaphore); ok && r.FailureMode == sluice.FailLocal {
		opts = append(opts, inflight.WithLocal(local, g.s.replicas))
	} else if r.FailureMode == sluice.FailLocal {
		opts = append(opts, inflight.WithFailureMode(sluice.FailClosed))
	}
	if r.InFlight.Adaptive {
		var c inflight.Controller
		var err error
		if r.InFlight.Controller == "aimd" {
			c, err = adaptive.NewAIMD(adaptive.AIMDConfig{Floor: r.InFlight.Floor, Ceiling: r.InFlight.Ceiling, Threshold: r.InFlight.Threshold})
		} else {
			c, err = adaptive.NewGradient(adaptive.GradientConfig{Floor: r.InFlight.Floor, Ceiling: r.InFlight.Ceiling})
		}
		if err != nil {
			g.s.log.Warn("gateway: in-flight rule ignored", "rule", r.FullKey, "error", err)
			return nil
		}
		opts = append(opts, inflight.WithController(c))
	}
	f, err := inflight.New(sem, r.FullKey, r.InFlight.Limit, opts...)
	if err != nil {
		g.s.log.Warn("gateway: in-flight rule ignored", "rule", r.FullKey, "error", err)
		return nil
	}
	last := r.Path[len(r.Path)-1]
	switch {
	case len(r.Path) == 1 && isRoute(last):
		return httplimit.InFlight(last.Value, httplimit.InFlightLimit{InFlight: f})
	case last.Value != "" || g.keyFunc(last.Key) == nil:
	case len(r.Path) == 1:
		return httplimit.InFlight("", httplimit.InFlightLimit{InFlight: f, Key: withPath(nil, last.Key, g.keyFunc(last.Key)), Missing: httplimit.MissingSkipped})
	case len(r.Path) == 2 && isRoute(r.Path[0]):
		return httplimit.InFlight(r.Path[0].Value, httplimit.InFlightLimit{InFlight: f, Key: withPath(r.Path[:1], last.Key, g.keyFunc(last.Key)), Missing: httplimit.MissingSkipped})
	}
	g.s.log.Warn("gateway: in-flight rule ignored (want a route, or remote_address or header:NAME at the top or under a route)", "rule", r.FullKey, "file", r.File, "line", r.Line)
	return nil
}
