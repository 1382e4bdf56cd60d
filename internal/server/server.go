// SPDX-License-Identifier: Apache-2.0

// Package server is sluice serve: Envoy's rate limit service (RLS v3) over
// gRPC, an HTTP JSON API, Prometheus metrics, health checks and hot reload
// of the configuration, over any sluice.Store.
//
// A Server holds the current configuration as an immutable snapshot behind
// an atomic pointer: a request uses the snapshot it started with, and a
// reload swaps in a new one, so reloads under load are race-free and a bad
// configuration never replaces a good one.
//
// All descriptors of one request are checked all-or-nothing through
// sluice.AllowAll: if any enforced descriptor is over its limit, nothing is
// consumed anywhere. A descriptor no rule matches, and an unlimited rule,
// are OK. Shadow-mode rules are checked (and counted in metrics) after the
// enforced ones admitted the request, and never refuse.
//
// Quota-mode rules (quota_mode, as in envoyproxy/ratelimit) refuse a
// request only together: it is refused when an ordinary descriptor is over
// its limit or when every quota-mode descriptor is over its quota. The
// check runs in rounds: a round refused only by quota-mode descriptors
// while others still have quota drops those over (they consume nothing) and
// takes the rest again, all-or-nothing; at most one round more than there
// are quota-mode descriptors. The RLS response's dynamic_metadata carries
// the metadata of the descriptors under their limits and the quota-mode
// verdict (quotaModeEnabled, quotaModeViolations).
//
// The HTTP API (Handler) refuses what a web page could make an operator's
// browser do to it: a request from another origin, a body not declared
// JSON, and, against DNS rebinding, a browser's request under a Host that
// is not an IP address, localhost or a name allowed with WithAllowedHosts.
// The Host check applies to requests that carry a browser's headers
// (Origin, Sec-Fetch-*, a Mozilla/ User-Agent) only, because a rebinding
// attack needs a browser while deployments reach the API by service names
// (sluice:8080) from clients that send none of them: Envoy, Prometheus,
// the kubelet's probes, curl. The reasons are in hosts.go.
package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/rlqs"
	"github.com/sluicehq/sluice/lease"
)

// Server answers rate-limit requests against the current configuration.
// Create it with New; it is safe for concurrent use.
type Server struct {
	store    sluice.Store // the stack over base (lease.go)
	base     sluice.Store // the store New was given
	leases   *lease.Store
	plan     plans
	log      *slog.Logger
	metrics  *metrics
	labels   metricNames
	live     live
	snap     atomic.Pointer[snapshot]
	stopping atomic.Bool

	headers, legacyHeaders bool // WithResponseHeaders

	loadOpts  []config.Option // WithConfigOptions: how ReloadDir loads
	shadowAll bool            // WithShadowMode

	storeFailLog  logBatch      // storeFailedRules's line
	unmatchedLog  logBatch      // unmatched's line
	unmatchedView unmatchedView // the live page's unmatched requests
	now           func() time.Time

	local    sluice.Store          // WithFallback
	replicas sluice.ReplicaCounter // WithFallback

	collectors []prometheus.Collector // WithCollector

	simulating chan struct{} // one token per simulation running (MaxSimulations)

	applyMu  sync.Mutex // serializes Apply and Gateway
	gateways []*Gateway // built by Apply for each configuration

	rlqs *rlqs.Service // rlqs.go

	started   time.Time   // New's time, for GET /v1/status
	storeName string      // WithStoreName
	health    storeHealth // failed decisions, for GET /v1/status
	quota     quotaState  // limits.go, usage.go

	holds reservations // POST /v1/reserve's, until committed (charge_http.go)

	hosts hostPolicy // WithAllowedHosts (hosts.go)
}

// snapshot is one loaded configuration with a Limiter per rule. Immutable.
type snapshot struct {
	cfg      *config.Config
	limiters map[*config.Rule]*sluice.Limiter
	// shadowed holds, under WithShadowMode, a copy of each rule in shadow
	// mode; nil otherwise.
	shadowed map[*config.Rule]*config.Rule
	loaded   time.Time
}

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithRegisterer registers the server's metrics with r as well as with the
// server's own registry (which /metrics serves).
func WithRegisterer(r prometheus.Registerer) Option {
	return func(s *Server) { s.metrics.extra = r }
}

// WithConfigOptions sets the options ReloadDir (and so Watch) loads the
// configuration with, such as config.WithMergeDomains().
func WithConfigOptions(opts ...config.Option) Option {
	return func(s *Server) { s.loadOpts = append(s.loadOpts, opts...) }
}

// WithShadowMode puts every rule of the configuration in shadow mode, as
// envoyproxy/ratelimit's SHADOW_MODE does: rules are checked, counted and
// reported, and never refuse. So is a limit the request itself carries
// (Envoy's per-descriptor override): envoy answers OK whatever its
// descriptors decided. Only the gateway's in-flight rules, which have no
// shadow mode, are still enforced (logged).
func WithShadowMode() Option { return func(s *Server) { s.shadowAll = true } }

// New returns a Server over store. It answers nothing (and /readyz fails)
// until a configuration is applied with Apply or ReloadDir.
func New(store sluice.Store, opts ...Option) (*Server, error) {
	if store == nil {
		return nil, errors.New("server: store is nil")
	}
	if _, err := openapiDoc(); err != nil {
		return nil, fmt.Errorf("server: the OpenAPI document: %w", err)
	}
	s := &Server{log: slog.Default(), metrics: newMetrics(), now: time.Now, simulating: make(chan struct{}, MaxSimulations)}
	s.base = store
	s.store = s.stack(store)
	s.storeFailLog.emit, s.unmatchedLog.emit = s.logStoreFailures, s.logUnmatched
	for _, o := range opts {
		o(s)
	}
	if err := s.hosts.compile(); err != nil {
		return nil, err
	}
	s.started = s.now()
	s.metrics.registry.MustRegister(newLiveCollector(s))
	s.setupFallback()
	s.setupQuota()
	if err := s.registerCollectors(); err != nil {
		return nil, err
	}
	s.metrics.registry.MustRegister(leaseCollector{s})
	if err := s.setupRLQS(); err != nil {
		return nil, err
	}
	if s.metrics.extra != nil {
		if err := s.metrics.registerWith(s.metrics.extra); err != nil {
			return nil, fmt.Errorf("server: register metrics: %w", err)
		}
	}
	return s, nil
}

// Store returns the store the server decides with.
func (s *Server) Store() sluice.Store { return s.base }

// Config returns the configuration in force, or nil before the first one.
func (s *Server) Config() *config.Config {
	if sn := s.snap.Load(); sn != nil {
		return sn.cfg
	}
	return nil
}

// Apply puts c in force and counts a successful reload. Requests already
// being decided finish with the configuration they started with. With a
// gateway (Server.Gateway), c's HTTP policies are built first, and if they
// do not build (two route patterns that conflict), c is not put in force
// and the error says why.
func (s *Server) Apply(c *config.Config) error {
	if c == nil {
		return errors.New("server: Apply: nil configuration")
	}
	sn := &snapshot{cfg: c, limiters: map[*config.Rule]*sluice.Limiter{}, loaded: s.now()}
	s.plan.p.Store(planOf(c, s.plan.p.Load())) // limiters bind with it
	for _, r := range c.Rules() {
		if r.InFlight != nil { // gateway only (gateway_inflight.go)
			s.log.Info("in-flight rule: enforced in gateway mode only; RLS and the JSON API cannot release a slot and answer as if no rule matched", "rule", r.FullKey, "file", r.File, "line", r.Line)
			continue
		}
		if r.Unlimited || r.Deny {
			continue
		}
		if r.Policy.Algorithm == sluice.LeakyBucket {
			s.log.Info("leaky-bucket rule: over RLS a meter, not a queue (Envoy cannot hold a request for its delay); gateway mode and the library queue", "rule", r.FullKey, "file", r.File, "line", r.Line)
		}
		if l := s.reuse(r); l != nil {
			sn.limiters[r] = l
			continue
		}
		l, err := sluice.NewLimiter(s.store, r.Policy, s.limiterOptions(r.FailureMode)...)
		if err != nil {
			return fmt.Errorf("server: %s:%d: %w", r.File, r.Line, err)
		}
		sn.limiters[r] = l
	}
	if s.shadowAll {
		sn.shadowed = make(map[*config.Rule]*config.Rule, len(c.Rules()))
		for _, r := range c.Rules() {
			sr := *r
			sr.ShadowMode = true
			sn.shadowed[r] = &sr
		}
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	handlers := make([]http.Handler, len(s.gateways))
	for i, g := range s.gateways {
		h, err := g.build(sn)
		if err != nil {
			return fmt.Errorf("server: %w", err)
		}
		handlers[i] = h
	}
	prev := s.snap.Swap(sn)
	for i, g := range s.gateways {
		g.cur.Store(&gatewayState{handler: handlers[i]})
	}
	s.plan.p.Store(planOf(c, nil))
	s.retire(prev, sn)
	s.quotaApplied(c)
	s.live.applied(c, sn.loaded)
	s.metrics.reloaded(true, sn.loaded)
	return nil
}

// ReloadDir loads the configuration in dir and puts it in force. If it does
// not load, the configuration in force stays, the failure is logged (one
// line per problem) and counted, and the error is returned.
func (s *Server) ReloadDir(dir string) error {
	c, err := config.LoadDir(dir, s.loadOpts...)
	if err == nil {
		err = s.Apply(c)
	}
	if err != nil {
		s.metrics.reloaded(false, s.now())
		s.live.failed(err, s.now())
		for _, line := range strings.Split(err.Error(), "\n") {
			s.log.Error("config reload failed; keeping the configuration in force", "dir", dir, "error", line)
		}
		return err
	}
	s.log.Info("config loaded", "dir", dir, "summary", c.Summary(), "domains", strings.Join(c.Domains(), ","))
	return nil
}

// SetStopping marks the server as shutting down: /readyz fails from now on,
// so load balancers stop sending new work, while every request, RLQS
// streams included, is still served (sluice serve's lame duck). Drain ends
// what is left when the shutdown stops accepting new work.
func (s *Server) SetStopping() { s.stopping.Store(true) }

// Drain begins the end of the service: it marks the server as stopping
// (SetStopping), and ends RLQS streams and refuses new ones (Envoys
// reconnect to another replica), so that a graceful stop of the gRPC
// server need not wait for streams that never end on their own. Call it as
// the server stops accepting new work, after the lame duck.
func (s *Server) Drain() {
	s.SetStopping()
	s.rlqs.Drain()
}
