// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/config"
)

// stats are the counts behind the metrics; the maps are guarded by
// Service.mu.
type stats struct {
	refused     atomic.Int64
	storeErrors atomic.Int64
	unmatchedBy map[string]uint64       // by domain
	requests    map[ruleLabel][2]uint64 // allowed, denied
}

// ruleLabel is a rule's labels: its domain and its one name
// (config.Rule.Title). Rules of one domain that share a name share the
// series.
type ruleLabel struct{ domain, rule string }

func labelOf(r *config.Rule) ruleLabel { return ruleLabel{r.Domain, r.Title()} }

func (st *stats) init() {
	st.unmatchedBy = map[string]uint64{}
	st.requests = map[ruleLabel][2]uint64{}
}

func (st *stats) unmatched(domain string) { st.unmatchedBy[domain]++ }

func (st *stats) reported(r *config.Rule, allowed, denied uint64) {
	if r == nil {
		return
	}
	c := st.requests[labelOf(r)]
	c[0] += allowed
	c[1] += denied
	st.requests[labelOf(r)] = c
}

var (
	descStreams = prometheus.NewDesc("sluice_rlqs_streams",
		"RLQS streams on this replica that report a bucket of the rule.", []string{"domain", "rule"}, nil)
	descDemand = prometheus.NewDesc("sluice_rlqs_demand_requests_per_second",
		"Demand of the rule's buckets reported by the whole fleet's streams (allowed + denied per second, measured by sluice's clock), as this replica last read it.", []string{"domain", "rule"}, nil)
	descAssigned = prometheus.NewDesc("sluice_rlqs_assigned_requests_per_second",
		"Rate assigned to the whole fleet's streams for the rule's buckets, as this replica last read it; at most the rule's limit per bucket.", []string{"domain", "rule"}, nil)
	descRequests = prometheus.NewDesc("sluice_rlqs_reported_requests_total",
		"Requests Envoys reported on this replica's streams for the rule, by result (allowed or denied by their assignments).", []string{"domain", "rule", "result"}, nil)
	descUnmatched = prometheus.NewDesc("sluice_rlqs_unmatched_buckets_total",
		"Buckets no rule matched (assigned allow-all), by domain (\"\" for a domain the configuration does not have).", []string{"domain"}, nil)
	descOpen = prometheus.NewDesc("sluice_rlqs_open_streams",
		"RLQS streams open on this replica.", nil, nil)
	descRefused = prometheus.NewDesc("sluice_rlqs_refused_total",
		"Streams and buckets refused because this replica serves the most streams it may, a stream reports the most buckets it may, or a report has a bucket id with more entries or bytes than one may have.", nil, nil)
	descStoreErrors = prometheus.NewDesc("sluice_rlqs_store_errors_total",
		"Divisions the store failed to make (the rule's failure mode decided them).", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *Service) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStreams, descDemand, descAssigned, descRequests, descUnmatched, descOpen, descRefused, descStoreErrors} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the service's metrics, per rule.
func (s *Service) Collect(ch chan<- prometheus.Metric) {
	type agg struct {
		streams  map[*stream]bool
		demand   float64
		assigned float64
	}
	s.mu.Lock()
	rules := map[ruleLabel]*agg{}
	for _, dv := range s.divs {
		a := rules[labelOf(dv.rule)]
		if a == nil {
			a = &agg{streams: map[*stream]bool{}}
			rules[labelOf(dv.rule)] = a
		}
		for p := range dv.parts {
			a.streams[p.st] = true
		}
		a.demand += dv.fleetDemand
		a.assigned += float64(dv.fleetGrant) / (float64(dv.fill) / float64(time.Second))
	}
	requests := make(map[ruleLabel][2]uint64, len(s.stats.requests))
	for k, v := range s.stats.requests {
		requests[k] = v
	}
	unmatched := make(map[string]uint64, len(s.stats.unmatchedBy))
	for k, v := range s.stats.unmatchedBy {
		unmatched[k] = v
	}
	open := len(s.streams)
	s.mu.Unlock()
	for l, a := range rules {
		ch <- prometheus.MustNewConstMetric(descStreams, prometheus.GaugeValue, float64(len(a.streams)), l.domain, l.rule)
		ch <- prometheus.MustNewConstMetric(descDemand, prometheus.GaugeValue, a.demand, l.domain, l.rule)
		ch <- prometheus.MustNewConstMetric(descAssigned, prometheus.GaugeValue, a.assigned, l.domain, l.rule)
	}
	for l, c := range requests {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(c[0]), l.domain, l.rule, "allowed")
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(c[1]), l.domain, l.rule, "denied")
	}
	for d, n := range unmatched {
		ch <- prometheus.MustNewConstMetric(descUnmatched, prometheus.CounterValue, float64(n), d)
	}
	ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(s.stats.refused.Load()))
	ch <- prometheus.MustNewConstMetric(descStoreErrors, prometheus.CounterValue, float64(s.stats.storeErrors.Load()))
}
