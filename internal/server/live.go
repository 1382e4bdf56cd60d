// SPDX-License-Identifier: Apache-2.0

package server

import (
	"crypto/sha256"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/config"
)

// The live view's bounds: per rule, a ring of HistorySeconds per-second
// counters and a table of at most NearLimitKeys keys. Memory is
// O(rules × (HistorySeconds + NearLimitKeys)), whatever the traffic.
//
// The near-limit table holds, for each tracked key, its use at its last
// decision: u = (capacity − remaining)/capacity, capacity being the burst
// (bucket kinds) or the limit, and u ≥ 1 for a refusal (or, in shadow mode,
// a would-be refusal). Only the store's decisions count there
// (outcome.measured): a failure mode's answer during a store outage is not
// the key's state. A decision updates its key's entry; a key not in a
// full table replaces the entry of least use only if its own use is
// strictly greater, and any entry idle for nearLimitStale counts as use −1.
// So a key stays listed until a key strictly nearer its limit comes or it
// falls idle for a minute; the table never holds more than NearLimitKeys
// keys (TestNearLimitIsBounded).
//
// The table holds a copy of each key's descriptor in which a value longer
// than NearLimitValueBytes is cut to its first NearLimitValueBytes bytes
// (fewer, to end on a whole UTF-8 character) followed by "…(cut from N
// bytes)", N being the value's full length; a descriptor with a cut value
// is told from others by the SHA-256 of its whole entries. So the table's
// memory, and GET /v1/rules, are bounded whatever the values
// (TestNearLimitCutsLongValues).
const (
	HistorySeconds = 300
	NearLimitKeys  = 10
	// NearLimitValueBytes bounds the bytes of a value the near-limit table
	// keeps and shows.
	NearLimitValueBytes = 256
	// nearLimitStale is how long a key stays in the near-limit table
	// without a new decision before any other key may replace it.
	nearLimitStale = time.Minute
)

// live keeps what the live page and GET /v1/rules show: per-rule recent
// counts and keys nearest their limit, and the configuration's version.
type live struct {
	rules atomic.Pointer[map[*config.Rule]*ruleStats]

	mu       sync.Mutex
	version  int64
	loadedAt time.Time
	lastAt   time.Time
	lastOK   bool
	lastErr  string
}

// ruleStats are one rule's recent decisions. Its mutex guards everything.
type ruleStats struct {
	mu   sync.Mutex
	ring [HistorySeconds]secondCount
	near []nearKey // at most NearLimitKeys
	// Totals since the rule was first loaded.
	decisions, refused, shadowRefused int64
}

type secondCount struct {
	sec                               int64 // Unix second this slot counts; 0: empty
	decisions, refused, shadowRefused int64
}

// nearKey is one tracked key: how close its last decision was to the limit.
type nearKey struct {
	entries []config.Entry // values cut to NearLimitValueBytes (cutEntries)
	// cut: some value was cut, and sum (hashKey of the whole entries) tells
	// the key from others.
	cut          bool
	sum          [sha256.Size]byte
	used         float64 // 1 − remaining/capacity at the last decision; ≥ 1 when over
	remaining    int64
	refused      int64 // refusals (or shadow would-be refusals) while tracked
	seen         int64 // Unix nanoseconds of the last decision
	seenSec      int64
	shadowRefuse bool
}

// applied records a configuration put in force: the new rules keep the
// counts of the rules with the same domain and key before.
func (l *live) applied(c *config.Config, at time.Time) {
	old := map[string]*ruleStats{}
	if m := l.rules.Load(); m != nil {
		for r, st := range *m {
			old[r.Domain+"\x00"+r.FullKey] = st
		}
	}
	m := make(map[*config.Rule]*ruleStats, len(c.Rules()))
	for _, r := range c.Rules() {
		st := old[r.Domain+"\x00"+r.FullKey]
		if st == nil {
			st = &ruleStats{}
		}
		m[r] = st
	}
	l.rules.Store(&m)
	l.mu.Lock()
	l.version++
	l.loadedAt, l.lastAt, l.lastOK, l.lastErr = at, at, true, ""
	l.mu.Unlock()
}

// failed records a configuration load that failed (the old one stays).
func (l *live) failed(err error, at time.Time) {
	l.mu.Lock()
	l.lastAt, l.lastOK, l.lastErr = at, false, err.Error()
	l.mu.Unlock()
}

// record counts one descriptor's decision under its rule.
func (l *live) record(r *config.Rule, entries []config.Entry, o *outcome, now time.Time) {
	m := l.rules.Load()
	if m == nil {
		return
	}
	st := (*m)[r]
	if st == nil || r.Unlimited {
		return
	}
	refused := o.over
	capacity := r.Policy.Limit
	if r.Policy.Algorithm.IsBucket() && r.Policy.Burst > 0 {
		capacity = r.Policy.Burst
	}
	used := 1.0
	if capacity > 0 && !r.Deny {
		used = float64(capacity-o.decision.Remaining) / float64(capacity)
	}
	if refused || o.shadowOver {
		used = max(used, 1)
	}
	ns := now.UnixNano()
	sec := ns / int64(time.Second)

	st.mu.Lock()
	defer st.mu.Unlock()
	slot := &st.ring[sec%HistorySeconds]
	if slot.sec != sec {
		*slot = secondCount{sec: sec}
	}
	slot.decisions++
	st.decisions++
	switch {
	case refused:
		slot.refused++
		st.refused++
	case o.shadowOver:
		slot.shadowRefused++
		st.shadowRefused++
	}
	// The near-limit table: update the key's entry, or take the place of
	// the entry furthest from its limit (a stale one first). A failure
	// mode's answer is not the key's state (outcome.measured): it is
	// counted above, and leaves the table as it was.
	if !o.measured() {
		return
	}
	cut := longValue(entries)
	var sum [sha256.Size]byte
	if cut {
		sum = hashKey(nil, entries)
	}
	for i := range st.near {
		k := &st.near[i]
		if k.cut == cut && (cut && k.sum == sum || !cut && slices.Equal(k.entries, entries)) {
			k.used, k.remaining, k.seen, k.seenSec = used, o.decision.Remaining, ns, sec
			if refused || o.shadowOver {
				k.refused++
				k.shadowRefuse = o.shadowOver
			}
			return
		}
	}
	nk := nearKey{cut: cut, sum: sum, used: used, remaining: o.decision.Remaining, seen: ns, seenSec: sec}
	if refused || o.shadowOver {
		nk.refused, nk.shadowRefuse = 1, o.shadowOver
	}
	if len(st.near) < NearLimitKeys {
		nk.entries = cutEntries(entries)
		st.near = append(st.near, nk)
		return
	}
	worst, score := -1, used
	for i := range st.near {
		k := &st.near[i]
		s := k.used
		if ns-k.seen > int64(nearLimitStale) {
			s = -1
		}
		if s < score {
			worst, score = i, s
		}
	}
	if worst >= 0 {
		nk.entries = cutEntries(entries)
		st.near[worst] = nk
	}
}

// longValue reports whether an entry's value is longer than
// NearLimitValueBytes.
func longValue(entries []config.Entry) bool {
	for _, e := range entries {
		if len(e.Value) > NearLimitValueBytes {
			return true
		}
	}
	return false
}

// cutEntries is the near-limit table's copy of entries: its own strings,
// none sharing memory with the request's, each value longer than
// NearLimitValueBytes cut to its first NearLimitValueBytes bytes, less the
// start of a UTF-8 character the cut would split, followed by "…(cut from N
// bytes)".
func cutEntries(entries []config.Entry) []config.Entry {
	es := make([]config.Entry, len(entries))
	for i, e := range entries {
		es[i] = config.Entry{Key: strings.Clone(e.Key), Value: strings.Clone(cut(e.Value, NearLimitValueBytes))}
	}
	return es
}

// cut returns s if it is at most n bytes long, else its first n bytes, less
// the start of a UTF-8 character the cut would split, followed by "…(cut
// from N bytes)", N being len(s).
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…(cut from " + strconv.Itoa(len(s)) + " bytes)"
}

// RulesResponse is the answer to GET /v1/rules.
type RulesResponse struct {
	Config ConfigStatus `json:"config"`
	// Now is the server's time, Unix seconds.
	Now int64 `json:"now"`
	// HistorySeconds is the length of each rule's series.
	HistorySeconds int        `json:"history_seconds"`
	Rules          []RuleInfo `json:"rules"`
	// Unmatched counts, per domain, the requests that matched no rule
	// (nothing limited them).
	Unmatched []UnmatchedInfo `json:"unmatched"`
}

// ConfigStatus is the configuration's version and reload status.
type ConfigStatus struct {
	// Version counts the configurations put in force since start (1: the
	// first).
	Version  int64     `json:"version"`
	LoadedAt time.Time `json:"loaded_at"`
	// LastReload is the last load attempt, successful or not.
	LastReload ReloadStatus `json:"last_reload"`
	Summary    string       `json:"summary"`
	Domains    []string     `json:"domains"`
}

// ReloadStatus is the outcome of one configuration load.
type ReloadStatus struct {
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

// RuleInfo is one rule in force and its recent decisions.
type RuleInfo struct {
	Domain string `json:"domain"`
	// Rule is the rule's full key: its address in the configuration
	// (POST /v1/simulate's rule).
	Rule string `json:"rule"`
	// Name is the rule's one name (config.Rule.Title): rate_limit.name
	// when set, else Rule; RLS, the JSON API, the RateLimit headers and
	// the metrics call it so too.
	Name        string  `json:"name"`
	Algorithm   string  `json:"algorithm,omitempty"`
	Limit       int64   `json:"limit"`
	Period      float64 `json:"period"` // seconds
	Burst       int64   `json:"burst,omitempty"`
	Shadow      bool    `json:"shadow_mode"`
	FailureMode string  `json:"failure_mode"`
	Unlimited   bool    `json:"unlimited,omitempty"`
	Deny        bool    `json:"deny,omitempty"`
	// Totals since the rule was first loaded.
	Decisions     int64 `json:"decisions"`
	Refused       int64 `json:"refused"`
	ShadowRefused int64 `json:"shadow_refused"`
	// Series are per-second counts over the last HistorySeconds seconds,
	// oldest first, ending at Now.
	Series Series `json:"series"`
	// NearLimit are the keys nearest their limit, nearest first.
	NearLimit []NearLimit `json:"near_limit"`
	// RLQS is the rule's division among the RLQS streams that report its
	// buckets, one entry per bucket, at most RLQSDivisionsPerRule of them,
	// those of greatest demand (live_rlqs.go); empty when none do.
	RLQS []RLQSDivision `json:"rlqs"`
}

// Series are per-second counts, oldest first.
type Series struct {
	Decisions     []int64 `json:"decisions"`
	Refused       []int64 `json:"refused"`
	ShadowRefused []int64 `json:"shadow_refused"`
}

// NearLimit is one key near its rule's limit.
type NearLimit struct {
	// Key is the descriptor: "rider_id=r1". A value longer than
	// NearLimitValueBytes is cut: "user=abc…(cut from 61440 bytes)".
	Key string `json:"key"`
	// Cut is true when a value in Key was cut.
	Cut bool `json:"cut,omitempty"`
	// Used is 1 − remaining/capacity at the key's last decision; 1 or more
	// when it was refused (or, in shadow mode, would have been).
	Used      float64   `json:"used"`
	Remaining int64     `json:"remaining"`
	Refused   int64     `json:"refused"`
	LastSeen  time.Time `json:"last_seen"`
}

func describeEntries(es []config.Entry) string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.Key)
		if e.Value != "" {
			b.WriteByte('=')
			b.WriteString(e.Value)
		}
	}
	return b.String()
}

// rulesView builds GET /v1/rules's answer.
func (s *Server) rulesView(now time.Time) RulesResponse {
	resp := RulesResponse{Now: now.Unix(), HistorySeconds: HistorySeconds, Rules: []RuleInfo{}, Unmatched: s.unmatchedList()}
	l := &s.live
	l.mu.Lock()
	resp.Config = ConfigStatus{Version: l.version, LoadedAt: l.loadedAt, LastReload: ReloadStatus{At: l.lastAt, OK: l.lastOK, Error: l.lastErr}}
	l.mu.Unlock()
	sn := s.snap.Load()
	if sn == nil {
		return resp
	}
	resp.Config.Summary, resp.Config.Domains = sn.cfg.Summary(), sn.cfg.Domains()
	m := l.rules.Load()
	nowSec := now.Unix()
	divs := s.rlqsDivisions()
	for _, r := range sn.cfg.Rules() {
		ri := RuleInfo{Domain: r.Domain, Rule: r.FullKey, Name: r.Title(), Shadow: r.ShadowMode || sn.shadowed[r] != nil, FailureMode: r.FailureMode.String(), Unlimited: r.Unlimited, Deny: r.Deny}
		if !r.Unlimited && !r.Deny {
			ri.Algorithm, ri.Limit, ri.Period = string(r.Policy.Algorithm), r.Policy.Limit, r.Policy.Period.Seconds()
			if r.Policy.Algorithm.IsBucket() {
				ri.Burst = r.Policy.Burst
				if ri.Burst == 0 {
					ri.Burst = ri.Limit
				}
			}
		}
		ri.Series = Series{Decisions: make([]int64, HistorySeconds), Refused: make([]int64, HistorySeconds), ShadowRefused: make([]int64, HistorySeconds)}
		ri.NearLimit = []NearLimit{}
		ri.RLQS = divs[r.FullKey]
		if ri.RLQS == nil {
			ri.RLQS = []RLQSDivision{}
		}
		if m != nil {
			if st := (*m)[r]; st != nil {
				st.mu.Lock()
				ri.Decisions, ri.Refused, ri.ShadowRefused = st.decisions, st.refused, st.shadowRefused
				for i := range HistorySeconds {
					sec := nowSec - HistorySeconds + 1 + int64(i)
					if c := st.ring[((sec%HistorySeconds)+HistorySeconds)%HistorySeconds]; c.sec == sec {
						ri.Series.Decisions[i], ri.Series.Refused[i], ri.Series.ShadowRefused[i] = c.decisions, c.refused, c.shadowRefused
					}
				}
				for _, k := range st.near {
					ri.NearLimit = append(ri.NearLimit, NearLimit{Key: describeEntries(k.entries), Cut: k.cut, Used: k.used, Remaining: k.remaining, Refused: k.refused, LastSeen: time.Unix(0, k.seen).UTC()})
				}
				st.mu.Unlock()
				slices.SortStableFunc(ri.NearLimit, func(a, b NearLimit) int {
					switch {
					case a.Used > b.Used:
						return -1
					case a.Used < b.Used:
						return 1
					}
					return strings.Compare(a.Key, b.Key)
				})
			}
		}
		resp.Rules = append(resp.Rules, ri)
	}
	return resp
}

// liveCollector exports, per rule (bounded by the configuration, never by
// keys), the would-be refusals of shadow rules and the nearest key's use.
// The rule label is the rule's title (config.Rule.Title); rules of one
// domain that share a title share a series (the sum of their would-be
// refusals, the largest use).
type liveCollector struct {
	s                 *Server
	shadowDesc, nearD *prometheus.Desc
}

func newLiveCollector(s *Server) *liveCollector {
	return &liveCollector{
		s: s,
		shadowDesc: prometheus.NewDesc("sluice_shadow_would_refuse_total",
			"Requests a shadow_mode rule would have refused, by domain and rule (its name, else its key in the tree), since the rule was first loaded.", []string{"domain", "rule"}, nil),
		nearD: prometheus.NewDesc("sluice_rule_nearest_key_used_ratio",
			"For each rule (its name, else its key in the tree), 1 − remaining/capacity of the key nearest its limit in the last minute (1 or more: refused, or would have been), by the store's decisions (a failure mode's answers during a store outage are left out); the keys are in GET /v1/rules.", []string{"domain", "rule"}, nil),
	}
}

func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.shadowDesc; ch <- c.nearD }

func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.s.live.rules.Load()
	if m == nil {
		return
	}
	now := c.s.now().UnixNano()
	type series struct {
		domain, rule      string
		shadow            int64
		near              float64
		hasShadow, hasUse bool
	}
	seen := map[*ruleStats]bool{} // one rule's stats are counted once
	byName := map[string]*series{}
	for r, st := range *m {
		if seen[st] {
			continue
		}
		seen[st] = true
		k := r.Domain + "\x00" + r.Title()
		a := byName[k]
		if a == nil {
			a = &series{domain: r.Domain, rule: r.Title()}
			byName[k] = a
		}
		st.mu.Lock()
		shadow, near := st.shadowRefused, 0.0
		for _, k := range st.near {
			if now-k.seen <= int64(nearLimitStale) {
				near = max(near, k.used)
			}
		}
		st.mu.Unlock()
		if r.ShadowMode {
			a.shadow += shadow
			a.hasShadow = true
		}
		if !r.Unlimited {
			a.near = max(a.near, near)
			a.hasUse = true
		}
	}
	for _, a := range byName {
		if a.hasShadow {
			ch <- prometheus.MustNewConstMetric(c.shadowDesc, prometheus.CounterValue, float64(a.shadow), a.domain, a.rule)
		}
		if a.hasUse {
			ch <- prometheus.MustNewConstMetric(c.nearD, prometheus.GaugeValue, a.near, a.domain, a.rule)
		}
	}
}
