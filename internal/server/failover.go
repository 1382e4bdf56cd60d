// SPDX-License-Identifier: Apache-2.0

package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
)

// defaultLocalKeys bounds the keys of the local store New makes when
// WithFallback gives none (it has no sweeper, so the bound is what keeps it
// small; expired keys make room first).
const defaultLocalKeys = 1 << 20

// WithFallback sets what rules that fail local (sluice.FailLocal, the
// default failure mode) decide on while the store fails: the in-process
// store local, and the replica count that sizes each replica's share. The
// default is a memory store of at most 2^20 keys and a count of 1.
func WithFallback(local sluice.Store, replicas sluice.ReplicaCounter) Option {
	return func(s *Server) { s.local, s.replicas = local, replicas }
}

// setupFallback fills in WithFallback's defaults and exports the replica
// count as the sluice_replicas gauge.
func (s *Server) setupFallback() {
	if s.local == nil {
		s.local = memstore.New(memstore.WithSweepInterval(0), memstore.WithMaxKeys(defaultLocalKeys))
	}
	if s.replicas == nil {
		s.replicas = sluice.FixedReplicas(1)
	}
	s.metrics.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_replicas",
		Help: "The number of replicas sharing the store, as this one knows it: each replica's share of a limit that fails local is the limit divided by it.",
	}, func() float64 { return float64(s.replicas.Replicas()) }))
}

// limiterOptions are the options of a rule's Limiter with failure mode m.
func (s *Server) limiterOptions(m sluice.FailureMode) []sluice.Option {
	return []sluice.Option{sluice.WithFailureMode(m), sluice.WithLocalStore(s.local, s.replicas)}
}

// unavailableRetryAfter is the least wait a refusal decided by a failure
// mode tells the client, as the middleware's 503 does
// (httplimit.DefaultUnavailableRetryAfter): with the store down there is no
// exact wait to give, and a wait of zero would invite an immediate retry
// from every refused client.
const unavailableRetryAfter = httplimit.DefaultUnavailableRetryAfter

// failedBackoff gives a refusal the failure mode decided (o.failed: the
// store failed and the rule fails closed, or fails local and is over its
// local share) a positive wait: its own when it has one (a local share
// knows when it admits again), else unavailableRetryAfter; ResetAfter is no
// shorter, so that RLS's duration_until_reset says the same. hits is what the descriptor
// asked for: a cost over the local share but within what the store could
// admit is not impossible (it can be admitted once the store is back).
func failedBackoff(o *outcome, hits int64) {
	r := o.rule
	if !o.failed || !o.over || r == nil || r.Deny {
		return
	}
	d := &o.decision
	capacity := r.Policy.Limit
	if r.Policy.Algorithm.IsBucket() && r.Policy.Burst > 0 {
		capacity = r.Policy.Burst
	}
	if n := int64(r.Shards); n > 1 {
		capacity = (capacity + n - 1) / n // the largest shard's: sluice gives the remainder to the first shards
	}
	if d.Impossible && hits <= capacity {
		d.Impossible = false
	}
	if d.Impossible {
		return
	}
	if d.RetryAfter <= 0 {
		d.RetryAfter = unavailableRetryAfter
	}
	d.ResetAfter = max(d.ResetAfter, d.RetryAfter)
}
