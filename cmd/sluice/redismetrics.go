// SPDX-License-Identifier: Apache-2.0

package main

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/redisstore"
)

// redisCollector exports a Redis store's call counters (redisstore.Stats),
// so that a slow Redis (timeouts, caller deadlines) can be told from a dead
// one (dial errors, the breaker open).
type redisCollector struct {
	store *redisstore.Store
	descs []*prometheus.Desc
	open  *prometheus.Desc // sluice_redis_breaker_open
}

// redisCounters are the metrics, in the order of redisCollector.values.
var redisCounters = []struct{ name, help string }{
	{"sluice_redis_calls_total", "Calls to Redis that got past the circuit breaker."},
	{"sluice_redis_errors_total", "Calls to Redis that failed, those that ran out of --store-timeout included; they move the circuit breaker."},
	{"sluice_redis_timeouts_total", "Calls to Redis that ran out of --store-timeout."},
	{"sluice_redis_caller_timeouts_total", "Calls to Redis given up at the caller's deadline less the margin, or not made because less was left; the rules' failure modes answered them, but they are not errors and do not move the circuit breaker. Replica heartbeats are not callers: sluice_redis_heartbeat_timeouts_total counts theirs."},
	{"sluice_redis_heartbeat_timeouts_total", "Replica heartbeats given up at their own deadline (the heartbeat interval, 1 s) on a slow Redis: no caller waited and no failure mode answered; not errors, and they do not move the circuit breaker."},
	{"sluice_redis_short_circuited_total", "Calls refused at once because the circuit breaker was open."},
	{"sluice_redis_breaker_opens_total", "Times the circuit breaker opened (went from closed to open): once per outage, since a probe that fails keeps it open."},
	{"sluice_redis_dial_errors_total", "Failed attempts to connect to Redis: at the start and on every reconnection after a connection was lost."},
}

func newRedisCollector(s *redisstore.Store) *redisCollector {
	c := &redisCollector{store: s, open: prometheus.NewDesc("sluice_redis_breaker_open",
		"1 while the circuit breaker is open (calls to Redis fail at once, but for one probe after each cooldown), else 0.", nil, nil)}
	for _, m := range redisCounters {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, nil, nil))
	}
	return c
}

func (c *redisCollector) values() []uint64 {
	st := c.store.Stats()
	return []uint64{st.Calls, st.Errors, st.Timeouts, st.CallerTimeouts, st.HeartbeatTimeouts, st.ShortCircuited, st.BreakerOpens, st.DialErrors}
}

func (c *redisCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.open
}

func (c *redisCollector) Collect(ch chan<- prometheus.Metric) {
	for i, v := range c.values() {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.CounterValue, float64(v))
	}
	open := 0.0
	if c.store.Stats().BreakerOpen {
		open = 1
	}
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, open)
}

// logRecovered is the option that has a Redis store log, at INFO, each
// time its circuit breaker closes again: the store answers, the rules
// decide on it instead of their failure modes, and the warnings stop. It
// says for how long the store had been failing.
func logRecovered(log *slog.Logger, store string) redisstore.Option {
	return redisstore.WithRecovered(func(failing time.Duration) {
		log.Info("the store recovered: it answers again, and the rules decide on it instead of their failure modes", "store", store, "failing_for", failing.Round(time.Millisecond))
	})
}
