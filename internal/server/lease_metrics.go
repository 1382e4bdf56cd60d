// SPDX-License-Identifier: Apache-2.0

package server

import "github.com/prometheus/client_golang/prometheus"

var (
	leaseLocalDesc = prometheus.NewDesc("sluice_lease_local_decisions_total",
		"Decisions of rules with lease: true made without the store (from a block, or a reused refusal), by domain and policy. Counts start again when a reload changes the rule.",
		[]string{"domain", "policy"}, nil)
	leaseCallsDesc = prometheus.NewDesc("sluice_lease_store_calls_total",
		"Store round trips of rules with lease: true (blocks taken, units returned), by domain and policy. Counts start again when a reload changes the rule.",
		[]string{"domain", "policy"}, nil)
	leaseUnitsDesc = prometheus.NewDesc("sluice_lease_units_total",
		"Units of rules with lease: true, by domain, policy and kind: taken from the store in blocks, spent on requests, returned unspent. Counts start again when a reload changes the rule.",
		[]string{"domain", "policy", "kind"}, nil)
)

// leaseCollector reports the lease counters of the rules in force.
type leaseCollector struct{ s *Server }

func (c leaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- leaseLocalDesc
	ch <- leaseCallsDesc
	ch <- leaseUnitsDesc
}

func (c leaseCollector) Collect(ch chan<- prometheus.Metric) {
	sn := c.s.snap.Load()
	if sn == nil {
		return
	}
	for r, l := range sn.limiters {
		if !r.Lease {
			continue
		}
		st := c.s.leases.Stats(l.Policy())
		name := r.Title()
		ch <- prometheus.MustNewConstMetric(leaseLocalDesc, prometheus.CounterValue, float64(st.Local), r.Domain, name)
		ch <- prometheus.MustNewConstMetric(leaseCallsDesc, prometheus.CounterValue, float64(st.StoreCalls), r.Domain, name)
		for _, u := range []struct {
			kind string
			v    uint64
		}{{"taken", st.Taken}, {"spent", st.Spent}, {"returned", st.Returned}} {
			ch <- prometheus.MustNewConstMetric(leaseUnitsDesc, prometheus.CounterValue, float64(u.v), r.Domain, name, u.kind)
		}
	}
}
