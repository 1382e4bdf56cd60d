// SPDX-License-Identifier: Apache-2.0

package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus metrics, in a registry of its own.
type metrics struct {
	registry    *prometheus.Registry
	extra       prometheus.Registerer
	decisions   *prometheus.CounterVec
	storeErrors *prometheus.CounterVec
	unmatched   *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	reloads     *prometheus.CounterVec
	lastOK      prometheus.Gauge
	lastTime    prometheus.Gauge
	lastOKTime  prometheus.Gauge
}

// decisionBuckets are sluice_decision_duration_seconds's buckets: from 5 µs
// (a memory store's decision) to 10 s, past redisstore.DefaultTimeout (3 s,
// serve's default --store-timeout), so that decisions that waited for a
// slow or dead Redis are in finite buckets, not only in +Inf.
var decisionBuckets = []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_decisions_total",
			Help: "Descriptor decisions by domain, policy (the rule's name or key) and result: ok, over_limit, shadow_over_limit, unlimited, failed_open, failed_closed, failed_local (admitted by the local share while the store failed), failed_local_over_limit, client_gone (the caller left before its answer: neither a decision nor a store failure).",
		}, []string{"domain", "policy", "result"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_store_errors_total",
			Help: "Requests whose store calls failed, once each (a decision's failure modes decided it; a reset or usage read answered an error), by domain.",
		}, []string{"domain"}),
		unmatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_unmatched_requests_total",
			Help: "Requests none of whose descriptors matched a rule, so that nothing limited them, by domain ((other): a domain no file defines). A misspelt domain or descriptor key in Envoy shows here.",
		}, []string{"domain"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_decision_duration_seconds",
			Help:    "Time to decide one request (all its descriptors), by API (grpc or http). The buckets reach 10 s, past the store's 3 s default timeout (--store-timeout), so a decision that waited for a slow store is in a bucket of its own.",
			Buckets: decisionBuckets,
		}, []string{"api"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_config_reloads_total",
			Help: "Configuration loads by result (success or failure). A failed load keeps the configuration in force.",
		}, []string{"result"}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_successful",
			Help: "1 if the last configuration load succeeded, 0 if it failed.",
		}),
		lastTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_timestamp_seconds",
			Help: "Unix time of the last configuration load, successful or not.",
		}),
		lastOKTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful configuration load: when the configuration in force was loaded.",
		}),
	}
	for _, r := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(r)
	}
	m.registry.MustRegister(m.collectors()...)
	m.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.storeErrors, m.unmatched, m.latency, m.reloads, m.lastOK, m.lastTime, m.lastOKTime}
}

func (m *metrics) registerWith(r prometheus.Registerer) error {
	for _, c := range m.collectors() {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// reloaded records a configuration load.
func (m *metrics) reloaded(ok bool, at time.Time) {
	t := float64(at.UnixNano()) / 1e9
	m.lastTime.Set(t)
	if ok {
		m.reloads.WithLabelValues("success").Inc()
		m.lastOK.Set(1)
		m.lastOKTime.Set(t)
		return
	}
	m.reloads.WithLabelValues("failure").Inc()
	m.lastOK.Set(0)
}
