// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// Usage (issue "Quotas", item 4): how much of a key's limit is used, and
// when it resets, without scraping the store; and the crossings of usage
// thresholds, counted and logged.
//
//	GET /v1/usage?domain=rides&tenant=acme[&key=value...]
//
// The first parameter named domain is the domain; every other parameter,
// in order, is one entry of the descriptor (so a descriptor key named
// "domain" is written after the domain parameter). The answer is a peek
// (cost 0: it changes nothing) under the rule the descriptor matches, with
// the key's override if it has one. Like POST /v1/check with hits_addend
// 0, it needs no token.

// Usage is the answer of GET /v1/usage. Durations are in seconds, times in
// RFC 3339 (UTC).
type Usage struct {
	Domain    string         `json:"domain"`
	Rule      string         `json:"rule"`
	Entries   []config.Entry `json:"entries"`
	Algorithm string         `json:"algorithm"`
	// Override is set when the key's limit is its own (PUT /v1/limits).
	Override bool `json:"override,omitempty"`
	// Limit is requests_per_unit per Period; Capacity is what the key can
	// hold at once (the burst of a bucket, else the limit).
	Limit    int64   `json:"limit"`
	Period   float64 `json:"period"`
	Capacity int64   `json:"capacity"`
	// Used is Capacity less Remaining: a window's count (the weighted
	// count of a sliding window), what a bucket has spent and not yet
	// refilled.
	Used      int64 `json:"used"`
	Remaining int64 `json:"remaining"`
	// PeriodStart and PeriodEnd bound the current window of a fixed or
	// sliding window (a calendar rule's calendar window; otherwise aligned
	// to multiples of the period since the Unix epoch, by this replica's
	// clock); a sliding log's is the last Period.
	// Buckets have no period: FullIn is the time until the bucket is full
	// again if nothing more arrives.
	PeriodStart *time.Time `json:"period_start,omitempty"`
	PeriodEnd   *time.Time `json:"period_end,omitempty"`
	FullIn      *float64   `json:"full_in,omitempty"`
	// ResetAfter is the time until the key is back to its idle state (an
	// empty window, a full bucket).
	ResetAfter float64 `json:"reset_after"`
	// Debt is what the key owes beyond its limit (costs charged after the
	// fact); 0 until charges exist.
	Debt int64 `json:"debt"`
	// StoreError is set when the store failed and the rule's failure mode
	// answered: the figures are then the local share's.
	StoreError bool `json:"store_error,omitempty"`
}

// usageQuery parses the query of GET /v1/usage in order.
func usageQuery(raw string) (domain string, entries []config.Entry, err error) {
	seenDomain := false
	for i, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		ek, err1 := url.QueryUnescape(k)
		ev, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil || ek == "" {
			return "", nil, fmt.Errorf("query parameter %d %q: want key=value, URL-encoded", i, part)
		}
		if ek == "domain" && !seenDomain {
			domain, seenDomain = ev, true
			continue
		}
		if len(entries) == config.MaxDepth {
			return "", nil, fmt.Errorf("query: more than %d entries", config.MaxDepth)
		}
		entries = append(entries, config.Entry{Key: ek, Value: ev})
	}
	switch {
	case domain == "":
		return "", nil, fmt.Errorf("query: domain: missing or empty (GET /v1/usage?domain=D&key=value...)")
	case len(entries) == 0:
		return "", nil, fmt.Errorf("query: no entries: give the descriptor as key=value parameters after domain")
	}
	return domain, entries, nil
}

func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	domain, entries, err := usageQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	ctx, cancel, ok := withTimeout(w, r)
	if !ok {
		return
	}
	defer cancel()
	sn := s.snap.Load()
	if sn == nil {
		writeError(w, http.StatusServiceUnavailable, "%v", errUnavailable)
		return
	}
	rule := sn.cfg.Match(domain, entries)
	if rule == nil || rule.Unlimited || rule.Deny || rule.InFlight != nil {
		writeError(w, http.StatusNotFound, "domain %q, entries %v: no rule with a limit matches", domain, cutEntries(entries))
		return
	}
	label := domain
	lim, eff := sn.limiters[rule], rule
	u := Usage{Domain: domain, Rule: rule.FullKey, Entries: entries}
	if rule.Overridable {
		if or, ol := s.override(ctx, rule, rule, entries); or != nil {
			lim, eff, u.Override = ol, or, true
		}
	}
	d, err := lim.AllowN(ctx, storeKey(rule, entries), 0)
	if err != nil {
		if ctx.Err() != nil {
			if r.Context().Err() == nil {
				writeError(w, http.StatusGatewayTimeout, "%s passed before the store answered", TimeoutHeader)
			}
			return
		}
		s.storeFailed(label, err, rule.Title)
		u.StoreError = true
	}
	p := eff.Policy
	now := s.now()
	u.Algorithm = string(p.Algorithm)
	u.Limit, u.Period, u.Capacity = p.Limit, p.Period.Seconds(), p.Capacity()
	u.Remaining = d.Remaining
	u.Used = max(u.Capacity-d.Remaining, 0)
	u.ResetAfter = d.ResetAfter.Seconds()
	u.Debt = d.Debt
	switch p.Algorithm {
	case sluice.FixedWindow, sluice.SlidingWindow:
		start, end := period(p, now)
		u.PeriodStart, u.PeriodEnd = &start, &end
	case sluice.SlidingLog:
		start, end := now.Add(-p.Period).UTC(), now.UTC()
		u.PeriodStart, u.PeriodEnd = &start, &end
	default:
		full := d.ResetAfter.Seconds()
		u.FullIn = &full
	}
	writeJSON(w, http.StatusOK, u)
}

// period returns the bounds, in UTC, of p's period that holds now: its
// calendar window if p has a calendar (as long as the wall clock makes it),
// else Period long, aligned to multiples of Period since the Unix epoch.
// GET /v1/usage reports it and threshold crossings are counted in it.
func period(p sluice.Policy, now time.Time) (start, end time.Time) {
	if p.Calendar.Unit != 0 {
		start, end = p.Calendar.Window(now)
		return start.UTC(), end.UTC()
	}
	ns := now.UnixNano()
	start = time.Unix(0, ns-ns%int64(p.Period)).UTC()
	return start, start.Add(p.Period)
}

// Threshold crossings. A decision that leaves a key's use of its capacity
// at or above one of its rule's usage_thresholds (80 and 100 percent by
// default; a refusal is 100) counts a crossing of each threshold not yet
// crossed by that key in the current period (a calendar rule's calendar
// window; otherwise the rule's period, aligned to multiples of it since the
// Unix epoch: a fixed window's window; for the other algorithms, the same
// grid), in
// sluice_usage_threshold_crossings_total{domain, rule, threshold}, and logs
// it once (within a budget per rule: crossLogBurst). The rule label is the rule's name (config.Rule.Title), as in
// every other metric. The labels are bounded: domains and rules are the
// configured ones, at most 8 thresholds each.
//
// A charge (POST /v1/charge, /v1/commit) counts its crossings as a check
// does. A reload keeps what was counted: a key counts, in a period, only
// thresholds above the highest it has counted there (so new thresholds
// above it count when reached, and none is counted twice).
//
// "Once" is remembered for at most maxCrossingKeys keys per process, about
// 100 bytes each with a short key (~6.5 MB): past it, entries of past
// periods go first, then arbitrary ones, and a key forgotten may count and
// log a crossing again in the same period. A decision below the lowest
// threshold costs a division and no lock. Each replica counts what it
// decides: a key's crossing is counted by the replica whose decision
// crossed it, and possibly again by another replica that decides the key
// later in the period (its first decision there also finds the key above
// the threshold).

// maxCrossingKeys bounds the keys whose crossings are remembered.
const maxCrossingKeys = 1 << 16

// The crossing lines of a rule are bounded (crossings.logLine): a per-IP
// rule under attack crosses two thresholds for every address, and logged
// a line each. A rule logs crossLogBurst lines at once, then one a second
// (a token bucket, by the process's clock); a crossing not logged is
// counted, and the count is logged with the rule's next line, or on a
// line of its own ("usage threshold crossings not logged") when the next
// line is due. The metric counts every crossing. Memory: one small entry
// per rule that crossed lately, at most maxCrossLogRules.
const (
	crossLogBurst    = 10
	maxCrossLogRules = 1 << 12
)

type crossings struct {
	s       *Server
	counter *prometheus.CounterVec

	mu   sync.Mutex
	seen map[crossKey]crossSeen

	logMu sync.Mutex
	logs  map[crossLogKey]*crossLog
}

// crossLogKey is a rule, by its address.
type crossLogKey struct{ domain, rule string }

// crossLog is the log budget of one rule's crossing lines.
type crossLog struct {
	tokens    float64   // lines it may log now, at most crossLogBurst
	at        time.Time // when tokens was computed
	dropped   int64     // crossings not logged since its last line
	scheduled bool      // a timer will log dropped
	domain    string    // the rule's, for the line of dropped
	name      string
}

// refill brings l's tokens to now (logMu held).
func (l *crossLog) refill(now time.Time) {
	l.tokens = min(crossLogBurst, l.tokens+now.Sub(l.at).Seconds())
	l.at = now
}

type crossKey struct{ rule, key string }

type crossSeen struct {
	end int64 // the end of the period remembered, UnixNano
	pct int   // the highest threshold (percent) counted in it
}

func (c *crossings) init(s *Server) {
	c.s = s
	c.seen = map[crossKey]crossSeen{}
	c.counter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_usage_threshold_crossings_total",
		Help: "Keys whose use of their limit crossed a usage threshold (rate_limit.usage_thresholds, percent; 80 and 100 by default), counted once per key, threshold and period by the replica that decided it, by domain, rule (its name, else its key in the tree, as the other per-rule metrics) and threshold.",
	}, []string{"domain", "rule", "threshold"})
	s.metrics.registry.MustRegister(c.counter)
	if s.metrics.extra != nil {
		s.metrics.extra.Register(c.counter) // a conflict shows in registerWith
	}
}

// observe counts and logs the thresholds o's decision crossed.
func (c *crossings) observe(domain string, entries []config.Entry, o *outcome) {
	r := o.rule
	// A limit the request carried (o.override) has a rule named by the
	// request's values: not counted, as it would leak them into labels.
	if r == nil || r.Unlimited || r.Deny || !o.measured() || o.override {
		return
	}
	capacity := r.Policy.Capacity()
	if capacity <= 0 {
		return
	}
	used := max(capacity-o.decision.Remaining, 0)
	if o.over || o.shadowOver {
		used = capacity
	}
	ths := r.UsageThresholds()
	level := 0
	for _, t := range ths {
		if used*100 >= int64(t)*capacity {
			level++
		}
	}
	if level == 0 {
		return
	}
	at := c.s.now()
	_, pe := period(r.Policy, at) // a calendar rule's calendar window
	now, end := at.UnixNano(), pe.UnixNano()
	k := crossKey{rule: r.FullKey, key: storeKey(r, entries)}
	c.mu.Lock()
	seen, ok := c.seen[k]
	if !ok && len(c.seen) >= maxCrossingKeys {
		c.evict(now)
	}
	if seen.end != end {
		seen = crossSeen{end: end}
	}
	// The thresholds crossed and not yet counted: those above the highest
	// one counted (which a reload that changed the thresholds keeps).
	from := level
	for from > 0 && ths[from-1] > seen.pct {
		from--
	}
	if from < level {
		c.seen[k] = crossSeen{end: end, pct: ths[level-1]}
	}
	c.mu.Unlock()
	for _, t := range ths[from:level] {
		th := strconv.Itoa(t)
		c.counter.WithLabelValues(domain, r.Title(), th).Inc()
		log, notLogged := c.logLine(r)
		if !log {
			continue
		}
		attrs := []any{"domain", r.Domain, "rule", r.Title(), "entries", fmt.Sprint(cutEntries(entries)),
			"threshold_percent", t, "used", used, "capacity", capacity, "period_end", time.Unix(0, end).UTC()}
		if notLogged > 0 {
			attrs = append(attrs, "crossings_not_logged", notLogged)
		}
		c.s.log.Info("usage threshold crossed", attrs...)
	}
}

// logLine reports whether a crossing of r may be logged now (see
// crossLogBurst), and the crossings of r not logged before it; when it may
// not, the crossing is counted, for r's next line.
func (c *crossings) logLine(r *config.Rule) (ok bool, notLogged int64) {
	now := time.Now()
	k := crossLogKey{r.Domain, r.FullKey}
	c.logMu.Lock()
	defer c.logMu.Unlock()
	l := c.logs[k]
	if l == nil {
		if c.logs == nil {
			c.logs = map[crossLogKey]*crossLog{}
		}
		if len(c.logs) >= maxCrossLogRules {
			c.pruneLogs(now)
		}
		l = &crossLog{tokens: crossLogBurst, at: now}
		c.logs[k] = l
	}
	l.domain, l.name = r.Domain, r.Title()
	l.refill(now)
	if l.tokens >= 1 {
		l.tokens--
		notLogged, l.dropped = l.dropped, 0
		return true, notLogged
	}
	l.dropped++
	if !l.scheduled {
		l.scheduled = true
		time.AfterFunc(time.Duration((1-l.tokens)*float64(time.Second)), func() { c.logDropped(k) })
	}
	return false, 0
}

// logDropped logs the crossings of rule k not logged, if some are still
// waiting, when its next line is due.
func (c *crossings) logDropped(k crossLogKey) {
	now := time.Now()
	c.logMu.Lock()
	l := c.logs[k]
	if l == nil {
		c.logMu.Unlock()
		return
	}
	l.scheduled = false
	l.refill(now)
	if l.dropped == 0 {
		c.logMu.Unlock()
		return
	}
	if l.tokens < 1 { // a line took the token; not yet
		l.scheduled = true
		time.AfterFunc(time.Duration((1-l.tokens)*float64(time.Second)), func() { c.logDropped(k) })
		c.logMu.Unlock()
		return
	}
	l.tokens--
	n, domain, name := l.dropped, l.domain, l.name
	l.dropped = 0
	c.logMu.Unlock()
	c.s.log.Info("usage threshold crossings not logged (more than one a second; the metric counts them all)", "domain", domain, "rule", name, "crossings_not_logged", n)
}

// pruneLogs forgets the rules whose budget is whole again and has nothing
// waiting (logMu held); failing that, whatever has nothing waiting.
func (c *crossings) pruneLogs(now time.Time) {
	for k, l := range c.logs {
		if l.dropped == 0 && !l.scheduled && l.tokens+now.Sub(l.at).Seconds() >= crossLogBurst {
			delete(c.logs, k)
		}
	}
	for k, l := range c.logs {
		if len(c.logs) < maxCrossLogRules {
			break
		}
		if l.dropped == 0 && !l.scheduled {
			delete(c.logs, k)
		}
	}
}

// evict makes room in seen (c.mu held): entries of periods that ended by
// now (UnixNano), and failing that an eighth of the entries, arbitrary
// ones.
func (c *crossings) evict(now int64) {
	for k, v := range c.seen {
		if v.end <= now {
			delete(c.seen, k)
		}
	}
	if len(c.seen) < maxCrossingKeys {
		return
	}
	n := len(c.seen) / 8
	for k := range c.seen {
		if n == 0 {
			break
		}
		delete(c.seen, k)
		n--
	}
}
