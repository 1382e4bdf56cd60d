// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// LimitSpec is a limit as the limits API takes and shows it: the fields of
// a rate_limit. On PUT, requests_per_unit is required; unit (with
// unit_multiplier) or period default to the rule's period, algorithm to
// the rule's, and burst to none (the limit). An override of a rule with a
// calendar (calendar: true) keeps the rule's calendar: its period, if
// given, must be the rule's (one calendar day, week, month or year) and
// its algorithm fixed-window or sliding-window (calendarKept).
type LimitSpec struct {
	RequestsPerUnit int64  `json:"requests_per_unit"`
	Unit            string `json:"unit,omitempty"`
	UnitMultiplier  int64  `json:"unit_multiplier,omitempty"`
	Period          string `json:"period,omitempty"`
	Burst           int64  `json:"burst,omitempty"`
	Algorithm       string `json:"algorithm,omitempty"`
}

// specOf is p as a LimitSpec, with its period as unit and multiplier when
// it is a whole number of a unit, else as period.
func specOf(p sluice.Policy) LimitSpec {
	ls := LimitSpec{RequestsPerUnit: p.Limit, Burst: p.Burst, Algorithm: string(p.Algorithm)}
	if u, m := unitOf(p.Period); u != "" {
		ls.Unit = u
		if m != 1 {
			ls.UnitMultiplier = m
		}
	} else {
		ls.Period = p.Period.String()
	}
	return ls
}

// policy is the policy ls sets on rule r, or an error naming the field
// (the caller names the rule).
func (ls LimitSpec) policy(r *config.Rule) (sluice.Policy, error) {
	p := sluice.Policy{Algorithm: r.Policy.Algorithm, Limit: ls.RequestsPerUnit, Period: r.Policy.Period, Burst: ls.Burst, Calendar: r.Policy.Calendar}
	if ls.RequestsPerUnit < 1 {
		return p, fmt.Errorf("requests_per_unit %d: must be at least 1 (an override limits; to refuse a key, give it a limit of 1 per year)", ls.RequestsPerUnit)
	}
	if ls.Algorithm != "" {
		a, err := sluice.ParseAlgorithm(ls.Algorithm)
		if err != nil {
			return p, fmt.Errorf("algorithm %q: want token-bucket, gcra, leaky-bucket, fixed-window, sliding-log or sliding-window", ls.Algorithm)
		}
		p.Algorithm = a
	}
	switch {
	case ls.Unit != "" && ls.Period != "":
		return p, errors.New("period: set unit or period, not both")
	case ls.Unit != "":
		d, ok := config.UnitDuration(ls.Unit)
		if !ok {
			return p, fmt.Errorf("unit %q: want second, minute, hour, day, week, month or year", ls.Unit)
		}
		m := max(ls.UnitMultiplier, 1)
		if ls.UnitMultiplier < 0 || m > int64(sluice.MaxPeriod/d) {
			return p, fmt.Errorf("unit_multiplier %d: must be from 1 to %d", ls.UnitMultiplier, int64(sluice.MaxPeriod/d))
		}
		p.Period = d * time.Duration(m)
	case ls.Period != "":
		if ls.UnitMultiplier != 0 {
			return p, errors.New("unit_multiplier: goes with unit, not period")
		}
		d, err := time.ParseDuration(ls.Period)
		if err != nil || d <= 0 {
			return p, fmt.Errorf("period %q: want a positive duration such as 10s or 24h", ls.Period)
		}
		p.Period = d
	case ls.UnitMultiplier != 0:
		return p, errors.New("unit_multiplier: goes with unit")
	}
	if err := ls.calendarKept(r.Policy, p); err != nil {
		return p, err
	}
	if err := p.Validate(); err != nil {
		// The policy has no name yet: the caller names the rule.
		return p, errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("sluice: policy %q: ", p.Name)))
	}
	return p, nil
}

// calendarKept reports why p, the policy ls sets on a rule whose policy is
// rule, cannot keep the rule's calendar, naming the field and its value
// (nil when the rule has none, or p keeps it). An override changes the
// limit, not the windows: a calendar rule's override counts in the rule's
// calendar windows, so its period is the rule's (the calendar unit's
// nominal length) and its algorithm one that has windows.
func (ls LimitSpec) calendarKept(rule, p sluice.Policy) error {
	c := rule.Calendar
	if c.Unit == 0 {
		return nil
	}
	keeps := fmt.Sprintf("the rule counts in calendar windows (%s), which an override keeps", c)
	switch {
	case p.Algorithm != sluice.FixedWindow && p.Algorithm != sluice.SlidingWindow:
		return fmt.Errorf("algorithm %q: %s: fixed-window or sliding-window", p.Algorithm, keeps)
	case p.Period == rule.Period:
		return nil
	case ls.Period != "":
		return fmt.Errorf("period %q: %s: leave period out (the rule's is one %s)", ls.Period, keeps, c.Unit)
	}
	if d, _ := config.UnitDuration(ls.Unit); d == rule.Period {
		return fmt.Errorf("unit_multiplier %d: %s: leave unit_multiplier out (the rule's period is one %s)", ls.UnitMultiplier, keeps, c.Unit)
	}
	return fmt.Errorf("unit %q: %s: leave unit out, or give %q", ls.Unit, keeps, c.Unit)
}

// Where overrides are kept, as the limits API's answers say (kept).
const (
	// KeptShared: in the store every replica shares (Redis).
	KeptShared = "store: shared by every replica on it"
	// KeptInMemory: in this process's memory, until it exits.
	KeptInMemory = "memory: this process only, until it exits"
)

// LimitOverride is one override as the limits API shows it.
type LimitOverride struct {
	Domain  string         `json:"domain"`
	Rule    string         `json:"rule"`
	Entries []config.Entry `json:"entries"`
	Limit   LimitSpec      `json:"limit"`
	SetBy   string         `json:"set_by"`
	SetAt   time.Time      `json:"set_at"`
	// Applied is false when no overridable rule of the configuration in
	// force has the rule's full key, or the limit does not fit the rule's
	// calendar (Reason says why); such an override is kept, and applies
	// again once the rule is back. Listings set it; GET of one descriptor
	// sets it only when false.
	Applied *bool  `json:"applied,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// LimitAnswer is the answer of GET, PUT and DELETE on one descriptor.
type LimitAnswer struct {
	Domain  string         `json:"domain"`
	Rule    string         `json:"rule"`
	Entries []config.Entry `json:"entries"`
	// Default is the rule's limit in the configuration.
	Default LimitSpec `json:"default"`
	// Override is the key's override (nil: none); Before is what it was
	// before a PUT or DELETE.
	Override *LimitOverride `json:"override"`
	Before   *LimitOverride `json:"before,omitempty"`
	// Effective is the limit that applies to the key now.
	Effective LimitSpec `json:"effective"`
	// Kept says where overrides are kept: KeptShared or KeptInMemory.
	Kept string `json:"kept"`
}

// LimitList is the answer of GET /v1/limits/{domain}.
type LimitList struct {
	Domain    string          `json:"domain"`
	Overrides []LimitOverride `json:"overrides"`
	// Kept says where overrides are kept: KeptShared or KeptInMemory.
	Kept string `json:"kept"`
}

// adminAuth checks the request's bearer token and returns the name of its
// holder. It answers the request (403, 401) and returns false when the API
// is off or the token is missing or wrong.
func (s *Server) adminAuth(w http.ResponseWriter, r *http.Request) (string, bool) {
	if len(s.quota.tokens) == 0 {
		writeError(w, http.StatusForbidden, "the limits API is off: start sluice serve with --admin-token-file FILE or %s set", AdminTokenEnv)
		return "", false
	}
	h := r.Header.Get("Authorization")
	scheme, tok, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
		writeError(w, http.StatusUnauthorized, "the limits API needs an Authorization: Bearer token")
		return "", false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	name := ""
	for _, t := range s.quota.tokens { // every token, whatever matches
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			name = t.name
		}
	}
	if name == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "the bearer token is not one of the admin tokens")
		return "", false
	}
	return name, true
}

// limitsPath parses /v1/limits/{domain}[/{key}={value}...] from the
// request's escaped path.
func limitsPath(r *http.Request) (domain string, entries []config.Entry, err error) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/limits/")
	segs := strings.Split(rest, "/")
	if len(segs) > 1 && segs[len(segs)-1] == "" {
		segs = segs[:len(segs)-1] // a trailing slash
	}
	if domain, err = url.PathUnescape(segs[0]); err != nil || domain == "" {
		return "", nil, fmt.Errorf("path: the domain %q: want a non-empty, percent-encoded name", segs[0])
	}
	if len(segs)-1 > config.MaxDepth {
		return "", nil, fmt.Errorf("path: %d entries: at most %d", len(segs)-1, config.MaxDepth)
	}
	for i, seg := range segs[1:] {
		k, v, ok := strings.Cut(seg, "=")
		ek, err1 := url.PathUnescape(k)
		ev, err2 := url.PathUnescape(v)
		if !ok || err1 != nil || err2 != nil || ek == "" {
			return "", nil, fmt.Errorf("path: entry %d %q: want key=value, percent-encoded", i, seg)
		}
		entries = append(entries, config.Entry{Key: ek, Value: ev})
	}
	return domain, entries, nil
}

// handleLimits serves the limits API.
func (s *Server) handleLimits(w http.ResponseWriter, r *http.Request) {
	who, ok := s.adminAuth(w, r)
	if !ok {
		return
	}
	domain, entries, err := limitsPath(r)
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
	if len(entries) == 0 {
		if r.Method != http.MethodGet {
			writeError(w, http.StatusBadRequest, "%s /v1/limits/{domain}/: no descriptor: PUT and DELETE take one (key=value segments)", r.Method)
			return
		}
		s.listLimits(ctx, w, r, sn, domain)
		return
	}
	rule := sn.cfg.Match(domain, entries)
	if rule == nil || !rule.Overridable {
		what := "matches no rule"
		if rule != nil {
			what = fmt.Sprintf("matches rule %s, which is not overridable (set overridable: true in its rate_limit)", rule.FullKey)
		}
		writeError(w, http.StatusNotFound, "domain %q, entries %v: %s", domain, cutEntries(entries), what)
		return
	}
	id := overrideID(rule.FullKey, storeKey(rule, entries))
	ans := LimitAnswer{Domain: domain, Rule: rule.FullKey, Entries: entries, Default: specOf(rule.Policy), Effective: specOf(rule.Policy), Kept: s.quota.kept}
	var prev string
	switch r.Method {
	case http.MethodGet:
		rec, err := s.quota.store.OverrideRecord(ctx, domain, id)
		if err != nil {
			overrideStoreFailed(ctx, w, r, "reading the override", err)
			return
		}
		ans.Override = decodeRecord(rec)
		if o := ans.Override; o != nil {
			if applied, reason := limitFits(rule, o); !applied {
				o.Applied, o.Reason = &applied, reason
			}
		}
	case http.MethodPut:
		var ls LimitSpec
		if !decodeJSON(w, r, &ls) {
			return
		}
		p, err := ls.policy(rule)
		if err != nil {
			writeError(w, http.StatusBadRequest, "body: limit for rule %s: %v", rule.FullKey, err)
			return
		}
		o := LimitOverride{Domain: domain, Rule: rule.FullKey, Entries: entries, Limit: specOf(p), SetBy: who, SetAt: s.now().UTC()}
		rec, _ := json.Marshal(o)
		prev, err = s.quota.store.SetOverride(ctx, domain, id, spec(p), string(rec))
		if errors.Is(err, sluice.ErrStoreFull) {
			writeError(w, http.StatusInsufficientStorage, "setting the override: %v", err)
			return
		}
		if err != nil {
			overrideStoreFailed(ctx, w, r, "setting the override", err)
			return
		}
		ans.Override = &o
	case http.MethodDelete:
		prev, err = s.quota.store.DeleteOverride(ctx, domain, id)
		if err != nil {
			overrideStoreFailed(ctx, w, r, "deleting the override", err)
			return
		}
		if prev == "" {
			writeError(w, http.StatusNotFound, "domain %q, entries %v: no override to delete", domain, cutEntries(entries))
			return
		}
	}
	if ans.Override != nil && ans.Override.Applied == nil {
		ans.Effective = ans.Override.Limit
	}
	if r.Method != http.MethodGet {
		ans.Before = decodeRecord(prev)
		before, after := "default", "default"
		if ans.Before != nil {
			before = limitText(ans.Before.Limit)
		}
		if ans.Override != nil {
			after = limitText(ans.Override.Limit)
		}
		s.log.Info("limit override changed", "who", who, "remote", r.RemoteAddr, "domain", domain, "rule", rule.FullKey,
			"entries", fmt.Sprint(cutEntries(entries)), "before", before, "after", after)
	}
	writeJSON(w, http.StatusOK, ans)
}

// overrideStoreFailed answers a failed call to the override store: 504
// when the caller's Sluice-Timeout passed (nothing if the caller has gone),
// else 502.
func overrideStoreFailed(ctx context.Context, w http.ResponseWriter, r *http.Request, what string, err error) {
	if ctx.Err() != nil {
		if r.Context().Err() == nil {
			writeError(w, http.StatusGatewayTimeout, "%s passed before the store answered: %s not done", TimeoutHeader, what)
		}
		return
	}
	writeError(w, http.StatusBadGateway, "%s: %v", what, err)
}

// limitText is ls in one line for the change log: "100/1m0s gcra burst 200".
func limitText(ls LimitSpec) string {
	p, err := ls.policy(&config.Rule{})
	if err != nil {
		b, _ := json.Marshal(ls)
		return string(b)
	}
	t := fmt.Sprintf("%d/%v %s", p.Limit, p.Period, p.Algorithm)
	if p.Burst != 0 {
		t += fmt.Sprintf(" burst %d", p.Burst)
	}
	return t
}

// decodeRecord is the override a stored record holds, nil for "" (or a
// record that is not one).
func decodeRecord(rec string) *LimitOverride {
	if rec == "" {
		return nil
	}
	var o LimitOverride
	if json.Unmarshal([]byte(rec), &o) != nil {
		return nil
	}
	return &o
}

// listLimits answers GET /v1/limits/{domain}: every override of domain, by
// rule and descriptor, each marked applied or not.
func (s *Server) listLimits(ctx context.Context, w http.ResponseWriter, r *http.Request, sn *snapshot, domain string) {
	recs, err := s.quota.store.Overrides(ctx, domain)
	if err != nil {
		overrideStoreFailed(ctx, w, r, "reading the overrides", err)
		return
	}
	out := LimitList{Domain: domain, Overrides: []LimitOverride{}, Kept: s.quota.kept}
	for _, rec := range recs {
		o := decodeRecord(rec)
		if o == nil {
			continue
		}
		applied, reason := overrideApplies(sn.cfg, o)
		o.Applied = &applied
		o.Reason = reason
		out.Overrides = append(out.Overrides, *o)
	}
	sort.Slice(out.Overrides, func(i, j int) bool {
		a, b := out.Overrides[i], out.Overrides[j]
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return fmt.Sprint(a.Entries) < fmt.Sprint(b.Entries)
	})
	writeJSON(w, http.StatusOK, out)
}

// overrideApplies reports whether o applies under c, and if not, why.
func overrideApplies(c *config.Config, o *LimitOverride) (bool, string) {
	r := c.Match(o.Domain, o.Entries)
	switch {
	case r == nil || r.FullKey != o.Rule:
		return false, fmt.Sprintf("no rule %s matches the descriptor in the configuration in force", o.Rule)
	case !r.Overridable:
		return false, fmt.Sprintf("rule %s is not overridable in the configuration in force", o.Rule)
	}
	return limitFits(r, o)
}

// limitFits reports whether o's limit can be set on rule r, and if not,
// why: the decision path (Server.overridePolicy) cannot apply it either,
// and decides with the default. An override set before a reload gave its
// rule a calendar, or another calendar unit, has a period the calendar
// does not have (calendarKept).
func limitFits(r *config.Rule, o *LimitOverride) (bool, string) {
	if _, err := o.Limit.policy(r); err != nil {
		return false, fmt.Sprintf("its limit does not fit rule %s in the configuration in force: %v", o.Rule, err)
	}
	return true, ""
}

// reportOrphans logs, after a configuration is put in force, each
// override of its domains that no longer applies (overrideApplies).
func (s *Server) reportOrphans(c *config.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, d := range c.Domains() {
		recs, err := s.quota.store.Overrides(ctx, d)
		if err != nil {
			s.log.Warn("listing the limit overrides after a reload", "domain", d, "error", err)
			return
		}
		for _, rec := range recs {
			o := decodeRecord(rec)
			if o == nil {
				continue
			}
			if ok, why := overrideApplies(c, o); !ok {
				s.log.Warn("limit override not applied", "domain", d, "rule", o.Rule, "entries", fmt.Sprint(cutEntries(o.Entries)), "reason", why)
			}
		}
	}
}

// quotaRoutes registers the limits API and the usage endpoint on mux (an
// *http.ServeMux, or anything with its HandleFunc).
func (s *Server) quotaRoutes(mux interface {
	HandleFunc(string, func(http.ResponseWriter, *http.Request))
}) {
	mux.HandleFunc("GET /v1/limits/{domain}", s.handleLimits)
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		mux.HandleFunc(m+" /v1/limits/{domain}/{descriptor...}", s.handleLimits)
	}
	mux.HandleFunc("GET /v1/usage", s.handleUsage)
}

// quotaApplied is called when c is put in force: override policies cached
// for the previous rules go, and overrides that no longer apply are logged
// (in the background: it reads the override store).
func (s *Server) quotaApplied(c *config.Config) {
	s.quota.mu.Lock()
	clear(s.quota.policies)
	s.quota.mu.Unlock()
	go s.reportOrphans(c)
}
