// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/redisstore"
)

// Per-key limits set at runtime (issue "Quotas", item 1).
//
// A rule opts in with rate_limit.overridable: true. Its limit in the file is
// the default; a key (one descriptor under the rule: a tenant, a user) may
// have an override, set through the limits API:
//
//	PUT    /v1/limits/{domain}/{key}={value}[/{key}={value}...]   set (JSON body: LimitSpec)
//	GET    /v1/limits/{domain}/{key}={value}[/...]                the default, the override and what applies
//	DELETE /v1/limits/{domain}/{key}={value}[/...]                back to the default
//	GET    /v1/limits/{domain}                                    every override of the domain
//
// The entries after the domain are the descriptor, in order, as a request
// would send it; keys and values are percent-encoded where they hold '/',
// '=' or '%'. The rule is the one the descriptor matches (Config.Match),
// and the override belongs to the rule's state key for the descriptor, so a
// share_threshold wildcard's override applies to every value it shares.
//
// The API needs a bearer token (WithAdminTokens: serve's --admin-token-file
// or SLUICE_ADMIN_TOKEN); without one configured it answers 403 and says
// how to turn it on, and a request without a valid token is answered 401.
// Tokens are compared in constant time (as SHA-256 digests, so their length
// does not show either). Every change is logged: who (the token's name),
// from where, the rule and descriptor, the override before and after.
//
// Overrides live in an OverrideStore: on Redis (a *redisstore.Store, found
// through wrappers), in Redis, so every replica on one Redis applies the
// same override from the next request after the write returns (see
// redisstore's OverrideSettle: the replicas read it from their own memory,
// invalidated by Redis, behind a barrier round trip at most every 50 ms,
// with no round trip per decision; a change answers 50 ms after Redis has
// it). On any other
// store, in this process's memory: they last as long as the process, and
// replicas do not share them.
//
// A reload of the files keeps the overrides: they are found by the rule's
// full key, so an override applies again as soon as a rule with that key
// is overridable. An override whose rule no longer exists (or is no longer
// overridable) is not applied; after each reload it is logged, and the
// domain's listing shows it with applied false.
//
// An override of a rule with a calendar (calendar: true, time_zone,
// anchor_*) keeps the rule's calendar: the key's windows stay the rule's
// calendar days, weeks, months or years in its time zone, and the override
// changes the limit (and may switch between fixed-window and
// sliding-window), not the windows. A PUT that gives such a rule another
// period, or an algorithm without windows, is refused (400, naming the
// field and value; LimitSpec.calendarKept). The stored spec records no
// calendar: the decision path takes it from the rule in force
// (overridePolicy), so a reload that moves the rule's time zone or anchor
// moves its overrides' windows with the default's, and an override stored
// by an earlier version (whose overrides dropped the calendar) counts in
// the calendar from its next decision.
// One whose period is not the calendar's (set before a reload gave the rule
// a calendar, or another unit) is not applied: the default decides, it is
// logged after the reload, and GET and the listing show it with applied
// false and the reason.
//
// What an override costs: a key with one is decided with the override's
// policy, named <rule>@<algorithm>/<limit>/<period>/<burst>, so keys with
// the same override share one policy (and one Limiter here, at most
// maxOverridePolicies of them cached); a key's state under its override is
// apart from its state under the default (an override starts the key
// afresh, and a deleted one returns it to what it had under the default).
// Per overridden key, memory holds its record (MemoryOverrides: 354 bytes
// with a one-entry descriptor, BenchmarkOverrideMemory; 100k tenants are
// 35 MB) or, on Redis, rueidis's cached reply for the keys this replica has
// decided (bounded by rueidis's cache size per connection, 128 MiB by
// default) and, in Redis, the spec string and the record. Reading a cached
// override costs the decision path about 0.5 to 1 µs and 4 allocations,
// against 17 to 37 µs for a read from Redis and 36 to 43 µs for the
// decision itself (redisstore's BenchmarkOverride, a shared 2-CPU box).

// OverrideStore keeps per-key limit overrides, by domain and id (an opaque
// string naming the rule and the key). The spec is what the decision path
// reads (Override is called per decision of an overridable rule, so it must
// be cheap, and must see every change that returned before it began); the
// record is what listings show. *redisstore.Store is one;
// MemoryOverrides is the in-process one.
type OverrideStore interface {
	Override(ctx context.Context, domain, id string) (spec string, ok bool, err error)
	SetOverride(ctx context.Context, domain, id, spec, record string) (prev string, err error)
	DeleteOverride(ctx context.Context, domain, id string) (prev string, err error)
	OverrideRecord(ctx context.Context, domain, id string) (record string, err error)
	Overrides(ctx context.Context, domain string) (map[string]string, error)
}

var (
	_ OverrideStore = (*redisstore.Store)(nil)
	_ OverrideStore = (*MemoryOverrides)(nil)
)

// MaxMemoryOverrides bounds the overrides a MemoryOverrides holds: a set
// beyond it is refused (507), so a runaway script cannot take the
// process's memory (at about 354 bytes each, 1M overrides are ~370 MB).
const MaxMemoryOverrides = 1 << 20

// MemoryOverrides is an OverrideStore in this process's memory: its
// overrides last as long as the process. The zero value is ready to use.
type MemoryOverrides struct {
	mu sync.RWMutex
	n  int
	d  map[string]map[string]memOverride // domain → id → override
}

type memOverride struct{ spec, record string }

// Override returns the spec of domain's override id.
func (m *MemoryOverrides) Override(_ context.Context, domain, id string) (string, bool, error) {
	m.mu.RLock()
	o, ok := m.d[domain][id]
	m.mu.RUnlock()
	return o.spec, ok, nil
}

// SetOverride sets domain's override id and returns the record it replaced.
func (m *MemoryOverrides) SetOverride(_ context.Context, domain, id, spec, record string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, had := m.d[domain][id]
	if !had && m.n >= MaxMemoryOverrides {
		return "", fmt.Errorf("%w: %d overrides in memory, the most (MaxMemoryOverrides)", sluice.ErrStoreFull, m.n)
	}
	if m.d == nil {
		m.d = map[string]map[string]memOverride{}
	}
	if m.d[domain] == nil {
		m.d[domain] = map[string]memOverride{}
	}
	m.d[domain][id] = memOverride{spec: spec, record: record}
	if !had {
		m.n++
	}
	return prev.record, nil
}

// DeleteOverride deletes domain's override id and returns its record.
func (m *MemoryOverrides) DeleteOverride(_ context.Context, domain, id string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, had := m.d[domain][id]
	if had {
		delete(m.d[domain], id)
		m.n--
		if len(m.d[domain]) == 0 {
			delete(m.d, domain)
		}
	}
	return prev.record, nil
}

// OverrideRecord returns the record of domain's override id ("" if none).
func (m *MemoryOverrides) OverrideRecord(_ context.Context, domain, id string) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.d[domain][id].record, nil
}

// Overrides returns the records of domain's overrides, by id.
func (m *MemoryOverrides) Overrides(_ context.Context, domain string) (map[string]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string]string, len(m.d[domain]))
	for id, o := range m.d[domain] {
		out[id] = o.record
	}
	return out, nil
}

// WithOverrideStore sets where per-key limit overrides are kept. The
// default is the server's store when it is a *redisstore.Store (looking
// through wrappers with an Unwrap() sluice.Store method), else a
// MemoryOverrides.
func WithOverrideStore(o OverrideStore) Option { return func(s *Server) { s.quota.store = o } }

// quotaState is the server's per-key limits and usage state.
type quotaState struct {
	store  OverrideStore
	kept   string // KeptShared or KeptInMemory
	tokens []adminToken

	mu       sync.RWMutex
	policies map[overridePolicyKey]*overridePolicy // bounded: maxOverridePolicies

	readFailLog logEvery
	crossings   crossings // usage.go
}

// maxOverridePolicies bounds the override policies (a rule copy and its
// Limiter) cached: past it an eighth of them, arbitrary ones, make room.
// Keys with the same override share one.
const maxOverridePolicies = 4096

type overridePolicyKey struct {
	base *config.Rule
	spec string
}

type overridePolicy struct {
	rule    *config.Rule
	limiter *sluice.Limiter
}

// setupQuota picks the override store.
func (s *Server) setupQuota() {
	if s.quota.store == nil {
		s.quota.store = overridesFor(s.Store()) // the store New was given, under any wrapper of the server's own
	}
	s.quota.kept = KeptShared
	if _, mem := s.quota.store.(*MemoryOverrides); mem {
		s.quota.kept = KeptInMemory
	}
	if len(s.quota.tokens) > 0 {
		s.log.Info("limits API on (/v1/limits)", "overrides_kept", s.quota.kept)
	}
	s.quota.policies = map[overridePolicyKey]*overridePolicy{}
	s.quota.crossings.init(s)
}

// overridesFor is the OverrideStore that shares overrides through store,
// or a MemoryOverrides.
func overridesFor(store sluice.Store) OverrideStore {
	for range 8 {
		switch st := store.(type) {
		case *redisstore.Store:
			return st
		case interface{ Unwrap() sluice.Store }:
			store = st.Unwrap()
		default:
			return &MemoryOverrides{}
		}
	}
	return &MemoryOverrides{}
}

// overrideID names the override of key (a store key, storeKey) under the
// rule with full key fullKey: the two, the first length-prefixed.
func overrideID(fullKey, key string) string {
	return strconv.Itoa(len(fullKey)) + ":" + fullKey + key
}

// override returns the rule and limiter that decide entries under r (base
// is r, or its shadow-mode copy) when its key has an override, else nil.
// A failure to read the override decides with the default (logged at most
// once a second). While Redis is down, an overridden key's failure mode
// (local: this replica's share) applies to the default's limit.
func (s *Server) override(ctx context.Context, r, base *config.Rule, entries []config.Entry) (*config.Rule, *sluice.Limiter) {
	spec, ok, err := s.quota.store.Override(ctx, r.Domain, overrideID(r.FullKey, storeKey(r, entries)))
	if err != nil {
		// Not counted as a store error: the decision's own call counts the
		// request if the store is down. A caller gone is no failure.
		if ctx.Err() != nil {
			return nil, nil
		}
		if n, due := s.quota.readFailLog.due(time.Now().UnixNano()); due {
			s.log.Warn("reading a limit override failed; the rule's default decides", "rule", r.FullKey, "error", err, "failures_since_last_log", n)
		}
		return nil, nil
	}
	if !ok {
		return nil, nil
	}
	k := overridePolicyKey{base: base, spec: spec}
	s.quota.mu.RLock()
	op := s.quota.policies[k]
	s.quota.mu.RUnlock()
	if op != nil {
		return op.rule, op.limiter
	}
	p, err := parseSpec(spec)
	if err == nil {
		op, err = s.overridePolicy(base, p)
	}
	if err != nil {
		if n, due := s.quota.readFailLog.due(time.Now().UnixNano()); due {
			s.log.Warn("a limit override does not apply; the rule's default decides", "rule", r.FullKey, "spec", spec, "error", err, "failures_since_last_log", n)
		}
		return nil, nil
	}
	s.quota.mu.Lock()
	if len(s.quota.policies) >= maxOverridePolicies {
		n := maxOverridePolicies / 8 // arbitrary ones: map order
		for k := range s.quota.policies {
			if n--; n < 0 {
				break
			}
			delete(s.quota.policies, k)
		}
	}
	s.quota.policies[k] = op
	s.quota.mu.Unlock()
	return op.rule, op.limiter
}

// effectivePolicy is the policy that decides entries under rule r: the
// key's override's, if r is overridable and the key has one, else r's.
func (s *Server) effectivePolicy(ctx context.Context, r *config.Rule, entries []config.Entry) sluice.Policy {
	if r.Overridable {
		if or, _ := s.override(ctx, r, r, entries); or != nil {
			return or.Policy
		}
	}
	return r.Policy
}

// overridePolicy is base with policy p, and its Limiter. p keeps base's
// calendar: an override changes the limit, not the windows (a spec records
// none). A p whose period or algorithm the calendar does not have is an
// error (the default decides; the listing says why, limitFits).
func (s *Server) overridePolicy(base *config.Rule, p sluice.Policy) (*overridePolicy, error) {
	c := *base
	p.Calendar = base.Policy.Calendar
	p.Name = base.Policy.Name + "@" + specName(p)
	c.Policy = p
	c.Unit, c.UnitMultiplier = unitOf(p.Period)
	l, err := sluice.NewLimiter(s.store, p, s.limiterOptions(c.FailureMode)...)
	if err != nil {
		return nil, err
	}
	return &overridePolicy{rule: &c, limiter: l}, nil
}

// specName is p's algorithm, limit, period and burst: "gcra/100/1m0s/0".
func specName(p sluice.Policy) string {
	return fmt.Sprintf("%s/%d/%v/%d", p.Algorithm, p.Limit, p.Period, p.Burst)
}

// spec is the string the decision path reads: algorithm, limit, period in
// nanoseconds and burst, separated by spaces. Not p's calendar, which is
// its rule's (overridePolicy).
func spec(p sluice.Policy) string {
	return fmt.Sprintf("%s %d %d %d", p.Algorithm, p.Limit, int64(p.Period), p.Burst)
}

func parseSpec(s string) (sluice.Policy, error) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return sluice.Policy{}, fmt.Errorf("override spec %q: want 4 fields", s)
	}
	alg, err := sluice.ParseAlgorithm(f[0])
	if err != nil {
		return sluice.Policy{}, fmt.Errorf("override spec %q: %w", s, err)
	}
	var n [3]int64
	for i := range n {
		if n[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return sluice.Policy{}, fmt.Errorf("override spec %q: %w", s, err)
		}
	}
	p := sluice.Policy{Algorithm: alg, Limit: n[0], Period: time.Duration(n[1]), Burst: n[2]}
	return p, p.Validate()
}

// unitOf expresses d as a whole number of the largest envoy unit that
// divides it ("", 0 if none does).
func unitOf(d time.Duration) (string, int64) {
	for _, u := range []string{"year", "month", "week", "day", "hour", "minute", "second"} {
		ud, _ := config.UnitDuration(u)
		if d%ud == 0 {
			return u, int64(d / ud)
		}
	}
	return "", 0
}
