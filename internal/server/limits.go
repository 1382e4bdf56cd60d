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
	"os"
	"sort"
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

// AdminToken is one bearer token of the admin API (the limits API), with a
// name the change log uses for whoever presents it.
type AdminToken struct {
	Name  string
	Token string
}

// WithAdminTokens turns on the limits API, for requests with one of tokens
// as their bearer token. Without it the API answers 403.
func WithAdminTokens(tokens ...AdminToken) Option {
	return func(s *Server) {
		for _, t := range tokens {
			if t.Name == "" {
				sum := sha256.Sum256([]byte(t.Token))
				t.Name = fmt.Sprintf("sha256:%x", sum[:4])
			}
			s.quota.tokens = append(s.quota.tokens, adminToken{name: t.Name, sum: sha256.Sum256([]byte(t.Token))})
		}
	}
}

// AdminTokenEnv is the environment variable serve reads an admin token
// from (named "env" in the change log).
const AdminTokenEnv = "SLUICE_ADMIN_TOKEN"

// LoadAdminTokens reads admin tokens from a file: one per line, either the
// token alone (named by the first 8 hex digits of its SHA-256, "sha256:…")
// or a name, a space and the token. Blank lines and lines starting with #
// are skipped. A token shorter than 16 bytes is refused.
func LoadAdminTokens(path string) ([]AdminToken, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("admin token file: %w", err)
	}
	var out []AdminToken
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t := AdminToken{Token: line}
		if name, tok, ok := strings.Cut(line, " "); ok {
			t = AdminToken{Name: name, Token: strings.TrimSpace(tok)}
		}
		if t, err = namedToken(t); err != nil {
			return nil, fmt.Errorf("admin token file %s:%d: %w", path, i+1, err)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("admin token file %s: no token in it", path)
	}
	return out, nil
}

// EnvAdminToken returns the token in AdminTokenEnv, named "env", if set.
func EnvAdminToken() (AdminToken, bool, error) {
	v := strings.TrimSpace(os.Getenv(AdminTokenEnv))
	if v == "" {
		return AdminToken{}, false, nil
	}
	t, err := namedToken(AdminToken{Name: "env", Token: v})
	if err != nil {
		return t, false, fmt.Errorf("%s: %w", AdminTokenEnv, err)
	}
	return t, true, nil
}

// minTokenLen is the shortest admin token accepted.
const minTokenLen = 16

func namedToken(t AdminToken) (AdminToken, error) {
	if len(t.Token) < minTokenLen {
		return t, fmt.Errorf("a token of %d bytes: want at least %d", len(t.Token), minTokenLen)
	}
	if t.Name == "" {
		sum := sha256.Sum256([]byte(t.Token))
		t.Name = fmt.Sprintf("sha256:%x", sum[:4])
	}
	return t, nil
}

type adminToken struct {
	name string
	sum  [sha256.Size]byte
}

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

// overridePolicy is base with policy p, and its Limiter.
func (s *Server) overridePolicy(base *config.Rule, p sluice.Policy) (*overridePolicy, error) {
	c := *base
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
// nanoseconds and burst, separated by spaces.
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

// LimitSpec is a limit as the limits API takes and shows it: the fields of
// a rate_limit. On PUT, requests_per_unit is required; unit (with
// unit_multiplier) or period default to the rule's period, algorithm to
// the rule's, and burst to none (the limit).
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

// policy is the policy ls sets on rule r, or an error naming the field.
func (ls LimitSpec) policy(r *config.Rule) (sluice.Policy, error) {
	p := sluice.Policy{Algorithm: r.Policy.Algorithm, Limit: ls.RequestsPerUnit, Period: r.Policy.Period, Burst: ls.Burst}
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
	if err := p.Validate(); err != nil {
		return p, errors.New(strings.TrimPrefix(err.Error(), "sluice: "))
	}
	return p, nil
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
	// force has the rule's full key (Reason says why); such an override is
	// kept, and applies again once the rule is back.
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
	case http.MethodPut:
		var ls LimitSpec
		if !decodeJSON(w, r, &ls) {
			return
		}
		p, err := ls.policy(rule)
		if err != nil {
			writeError(w, http.StatusBadRequest, "body: %v", err)
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
	if ans.Override != nil {
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
	s.quota.crossings.applied()
	go s.reportOrphans(c)
}
