// SPDX-License-Identifier: Apache-2.0

package server

import (
	"sort"
	"strings"
	"sync"
)

// A request none of whose descriptors matches a rule is allowed, as in
// envoyproxy/ratelimit, so a typo in Envoy's domain or descriptor keys
// turns limiting off without an error anywhere. The server makes it
// visible: such requests are counted per domain in
// sluice_unmatched_requests_total (a domain no file defines counts as
// OtherValue, so requests add no label values), logged at most once a
// second with the domain and the descriptors' keys (the line names every
// domain of its second, up to logBatchNames, with the number of requests
// and the last one's keys), and listed on the live page (UnmatchedInfo).

// unmatchedView keeps the live page's view of unmatched requests: one entry
// per domain label, so as many as there are configured domains plus one.
type unmatchedView struct {
	mu       sync.Mutex
	byDomain map[string]*UnmatchedInfo
}

// UnmatchedInfo counts the requests of one domain that matched no rule.
type UnmatchedInfo struct {
	// Domain is the domain, or OtherValue for every domain no file
	// defines.
	Domain string `json:"domain"`
	// Requests counts them since start.
	Requests int64 `json:"requests"`
	// LastDomain and LastKeys are the last such request's domain (as
	// sent, cut to MaxLabelValueBytes) and its descriptors' keys (at most
	// 8 descriptors of 8 keys, each cut: under 8 KiB).
	LastDomain string `json:"last_domain"`
	LastKeys   string `json:"last_keys"`
	// LastAt is when it came, Unix seconds.
	LastAt int64 `json:"last_at"`
}

// The last unmatched request's keys list at most unmatchedDescriptors
// descriptors of at most unmatchedEntries keys each, every key cut to
// MaxLabelValueBytes (with its mark, under 110 bytes): under 8 KiB per
// domain label whatever the request, kept, served on every GET /v1/rules
// and logged. Enough to spot a misspelt key; a request within
// MaxDescriptors and config.MaxDepth could otherwise leave 64 × 64 keys.
const (
	unmatchedDescriptors = 8
	unmatchedEntries     = 8
)

// unmatchedKeys lists descs' entry keys, a descriptor's joined by "," and
// descriptors by " | ", within the bounds above, "…" marking what is left
// out: the values are left out too (they are the unbounded part).
func unmatchedKeys(descs []descriptor) string {
	var b strings.Builder
	for i, d := range descs {
		if i == unmatchedDescriptors {
			b.WriteString(" | …")
			break
		}
		if i > 0 {
			b.WriteString(" | ")
		}
		for j, e := range d.entries {
			if j > 0 {
				b.WriteByte(',')
			}
			if j == unmatchedEntries {
				b.WriteString("…")
				break
			}
			b.WriteString(labelValue(e.Key))
		}
	}
	return b.String()
}

// noneMatched reports whether no descriptor of outs has a rule.
func noneMatched(outs []outcome) bool {
	for i := range outs {
		if outs[i].rule != nil {
			return false
		}
	}
	return true
}

// unmatched records a request of domain (label: its domain label) that
// matched no rule.
func (s *Server) unmatched(label, domain string, descs []descriptor) {
	s.metrics.unmatched.WithLabelValues(label).Inc()
	now := s.now()
	keys := unmatchedKeys(descs)
	v := &s.unmatchedView
	v.mu.Lock()
	if v.byDomain == nil {
		v.byDomain = map[string]*UnmatchedInfo{}
	}
	u := v.byDomain[label]
	if u == nil {
		u = &UnmatchedInfo{Domain: label}
		v.byDomain[label] = u
	}
	u.Requests++
	u.LastDomain, u.LastKeys, u.LastAt = labelValue(domain), keys, now.Unix()
	v.mu.Unlock()
	s.unmatchedLog.add(batchNote{name: labelValue(domain), detail: keys})
}

// logUnmatched is unmatchedLog's line: every domain (as sent, cut) that
// unmatched requests named since the last line, with their number and the
// last one's keys.
func (s *Server) logUnmatched(l *batchLine) {
	keys := func(d any) string {
		if k, _ := d.(string); k != "" {
			return "keys " + k
		}
		return "no keys"
	}
	s.log.Warn("requests matched no rule: nothing limited them (is Envoy's domain or a descriptor key misspelt?)",
		"domains", l.list(keys, "requests of other domains"), "unmatched_since_last_log", l.total)
}

// unmatchedList is the live page's list, by domain.
func (s *Server) unmatchedList() []UnmatchedInfo {
	v := &s.unmatchedView
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]UnmatchedInfo, 0, len(v.byDomain))
	for _, u := range v.byDomain {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out
}
