// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decide"
)

// MaxDescriptors is the most descriptors one request may carry, over RLS
// and in the bodies of POST /v1/check, /v1/charge and /v1/reserve; a
// descriptor carries at most config.MaxDepth entries, the deepest a rule
// can be (a longer one could match no rule). A request over either bound
// is refused (RLS: InvalidArgument; HTTP: 400) naming the field and the
// number given.
//
// Envoy sends one descriptor per rate_limits entry of the route (and of
// its virtual host) whose actions all produce an entry, and
// envoyproxy/ratelimit decides them one by one: a handful in any real
// configuration, tens at most. 64 leaves room for that. Unbounded, one
// request was decided whatever its size: 360,000 descriptors of one entry
// (3.6 MB, under gRPC's 4 MiB message limit) grew the heap by 245 MiB, a
// 1 MiB /v1/check body of empty descriptors by 134 MiB. With the bounds,
// a request's descriptors cost in proportion to its bytes.
const MaxDescriptors = 64

// descriptorsBound returns the message that refuses a request of n
// descriptors, or "" when n is within MaxDescriptors.
func descriptorsBound(n int) string {
	if n <= MaxDescriptors {
		return ""
	}
	return fmt.Sprintf("descriptors: %d given; at most %d a request", n, MaxDescriptors)
}

// entriesBound returns the message that refuses a request whose
// descriptor i has n entries, or "" when n is within config.MaxDepth
// (i < 0: the descriptor is not named).
func entriesBound(i, n int) string {
	if n <= config.MaxDepth {
		return ""
	}
	field := "entries"
	if i >= 0 {
		field = fmt.Sprintf("descriptors[%d].entries", i)
	}
	return fmt.Sprintf("%s: %d given; at most %d a descriptor", field, n, config.MaxDepth)
}

// descriptor is one descriptor of a request, whatever the API.
type descriptor struct {
	entries []config.Entry
	hits    int64 // units to take; 0 peeks
	// override, when not nil, is a limit the caller supplied for this
	// descriptor (Envoy's per-descriptor limit override).
	override *sluice.Policy
}

// outcome is the answer for one descriptor.
type outcome struct {
	rule     *config.Rule // nil: no rule applies
	decision sluice.Decision
	over     bool // this descriptor is over its limit (and not in shadow mode)
	// shadowOver: the rule is in shadow mode and would have refused.
	shadowOver bool
	failed     bool // the store failed; the failure mode decided
	// configured is the rule as configured when rule is its shadow-mode
	// copy (WithShadowMode): the live view counts under it.
	configured *config.Rule
	// override: rule is the descriptor's own limit (overrideRule), whose
	// names come from the request; metrics count it as OverridePolicy.
	override bool
	// gone: the caller left (its context ended) before the answer; counted
	// as client_gone, neither a decision nor a store failure.
	gone bool
}

// measured reports whether o's decision is its key's state as the store
// holds it: not when the store failed and the rule's failure mode answered
// (open, closed, or the local share's count), nor when the caller left.
// Only such decisions say how near a key is to its limit: they alone feed
// the keys nearest their limit (GET /v1/rules, the live page,
// sluice_rule_nearest_key_used_ratio) and the usage threshold crossings.
// A failure mode's answer says nothing of the key: fail open answers
// remaining 0 (100% used) for a key that may have taken 1 of 100.
func (o *outcome) measured() bool { return !o.failed && !o.gone }

// errUnavailable is returned while no configuration is in force.
var errUnavailable = errors.New("no configuration loaded yet")

// errGone is returned (wrapping the context's error) when the caller has
// gone before its answer: there is nobody to answer.
var errGone = errors.New("the caller has gone")

// check decides one request: all its enforced descriptors all-or-nothing,
// then its shadow-mode ones. allowed is false if any descriptor is over.
func (s *Server) check(ctx context.Context, api, domain string, descs []descriptor) (allowed bool, outs []outcome, err error) {
	start := time.Now()
	defer func() { s.metrics.latency.WithLabelValues(api).Observe(time.Since(start).Seconds()) }()

	sn := s.snap.Load()
	if sn == nil {
		return false, nil, errUnavailable
	}
	// A domain no file configures counts as OtherValue: the domain label,
	// like the policy label, takes no unbounded value from requests.
	label := domain
	if !sn.cfg.HasDomain(domain) {
		label = OtherValue
	}
	// fail notes a failed store call on the rules of outs[idx]; the
	// request's failures are counted once, when it is done (the metric,
	// the status and the log count requests, and name each rule once),
	// however many of its calls failed.
	var failures storeFailures
	defer s.storeFailedRules(label, &failures)
	fail := func(err error, idx []int) { failures.add(err, s.ruleNames(label, outs, idx)) }
	outs = make([]outcome, len(descs))
	limiters := make([]*sluice.Limiter, len(descs))
	replaced := map[string]bool{}
	for i, d := range descs {
		// A limit override counts only in a domain a file defines, as in
		// envoyproxy/ratelimit, which looks the domain up first.
		if d.override != nil && sn.cfg.HasDomain(domain) {
			r := overrideRule(domain, d.entries, *d.override, sn.cfg.Match(domain, d.entries))
			// WithShadowMode: an override never refuses either, as
			// envoyproxy/ratelimit's SHADOW_MODE answers OK whatever
			// decided; it is counted as a shadow rule is.
			r.ShadowMode = s.shadowAll
			if r.Deny { // a zero limit: decided without the store
				outs[i].rule, outs[i].override = r, true
				continue
			}
			l, lerr := sluice.NewLimiter(s.store, r.Policy, s.limiterOptions(r.FailureMode)...)
			if lerr != nil {
				return false, nil, fmt.Errorf("descriptor %d: limit override: %w", i, lerr)
			}
			outs[i].rule, limiters[i], outs[i].override = r, l, true
			continue
		}
		r := s.resolve(ctx, sn, domain, d.entries, &outs[i], &limiters[i])
		if r == nil {
			continue
		}
		// An unlimited rule replaces too, as in envoyproxy/ratelimit.
		for _, name := range r.Replaces {
			replaced[name] = true
		}
	}
	// A rule another matched rule replaces is dropped, as in
	// envoyproxy/ratelimit.
	if len(replaced) > 0 {
		for i := range outs {
			if r := outs[i].rule; r != nil && r.Name != "" && replaced[r.Name] {
				outs[i].rule, limiters[i] = nil, nil
			}
		}
	}

	// The enforced descriptors, all-or-nothing. A deny rule (a zero limit)
	// refuses the request; the others are then only peeked at. Quota-mode
	// descriptors refuse it only when all of them are over (quotaRefuses).
	var (
		checks []sluice.Check
		idx    []int
		q      quotaCount
	)
	refused := false
	for i := range outs {
		r := outs[i].rule
		switch {
		case r == nil || r.Unlimited || r.ShadowMode:
		case r.Deny:
			q.add(r)
			if descs[i].hits > 0 {
				outs[i].over = true
				refused = refused || !r.QuotaMode
				q.over(r)
			}
		default:
			q.add(r)
			checks = append(checks, sluice.Check{Limiter: limiters[i], Key: storeKey(r, descs[i].entries), Cost: descs[i].hits, Peek: descs[i].hits == 0})
			idx = append(idx, i)
		}
	}
	refused = refused || q.refuses()
	if refused {
		for j := range checks {
			checks[j].Cost = 0
		}
	}
	// Each round takes all remaining descriptors all-or-nothing. A round
	// refused only by quota-mode descriptors, while others of them still
	// have quota, drops those that are over (they consume nothing) and takes
	// the rest again: at most one round more than there are quota-mode
	// descriptors.
	for len(checks) > 0 {
		res, aerr := allowAll(ctx, checks)
		v := decide.Classify(ctx, checks, res, aerr)
		if v.Outcome == decide.Gone {
			// ctx.Err(), not v.Err: nothing of v escapes, so neither does res.
			return false, nil, s.gone(label, descs, outs, ctx.Err())
		}
		if aerr != nil && res.Decisions == nil {
			return false, nil, aerr // a bad request, not a store failure
		}
		ordinaryOver := false
		for j, i := range idx {
			d := res.Decisions[j]
			outs[i].decision = d
			outs[i].failed = v.StoreFailed()
			outs[i].over = !d.Allowed
			if !d.Allowed {
				if outs[i].rule.QuotaMode {
					q.over(outs[i].rule)
				} else {
					ordinaryOver = true
				}
			}
		}
		if v.StoreFailed() {
			fail(aerr, idx)
		}
		if res.Allowed {
			break
		}
		if ordinaryOver || q.refuses() {
			refused = true
			break
		}
		if aerr != nil {
			break // the failure modes decided; another round would fail too
		}
		keep := 0
		for j, i := range idx {
			if res.Decisions[j].Allowed {
				checks[keep], idx[keep] = checks[j], i
				keep++
			}
		}
		checks, idx = checks[:keep], idx[:keep]
	}
	if refused {
		if err := s.countRefused(ctx, label, descs, outs, limiters, fail); err != nil {
			return false, nil, err
		}
	}
	allowed = !refused
	for i := range outs {
		failedBackoff(&outs[i], descs[i].hits)
	}

	// Shadow-mode rules: take only if the request was admitted (a refused
	// request consumes nothing anywhere), otherwise peek.
	for i := range outs {
		r := outs[i].rule
		if r == nil || !r.ShadowMode || r.Unlimited {
			continue
		}
		if r.Deny {
			outs[i].shadowOver = descs[i].hits > 0
			continue
		}
		cost := descs[i].hits
		if !allowed {
			cost = 0
		}
		d, terr := limiters[i].AllowN(ctx, storeKey(r, descs[i].entries), cost)
		if v := decide.Classify(ctx, nil, sluice.Result{}, terr); v.Outcome == decide.Gone {
			return false, nil, s.gone(label, descs, outs, ctx.Err())
		}
		if terr != nil {
			fail(terr, []int{i})
			outs[i].failed = true
		}
		outs[i].shadowOver = !d.Allowed
		d.Allowed = true
		outs[i].decision = d
	}

	for i := range outs {
		s.count(label, descs[i].entries, &outs[i])
	}
	if noneMatched(outs) {
		s.unmatched(label, domain, descs)
	}
	return allowed, outs, nil
}

// resolve finds what decides the descriptor entries of domain: the rule the
// configuration matches (nil when none does, or an in-flight rule, which
// RLS and the JSON API cannot release), and sets o.rule and *l to the rule
// and limiter that decide it: the matched rule's, its shadow-mode copy
// under WithShadowMode, or the key's own limit (limits.go), with
// o.configured the matched rule when it differs. check and charge share it,
// so a charge lands on the state the key's decisions read.
func (s *Server) resolve(ctx context.Context, sn *snapshot, domain string, entries []config.Entry, o *outcome, l **sluice.Limiter) *config.Rule {
	r := sn.cfg.Match(domain, entries)
	if r == nil || r.InFlight != nil {
		return nil
	}
	o.rule, *l = r, sn.limiters[r]
	if sr := sn.shadowed[r]; sr != nil {
		o.rule, o.configured = sr, r // WithShadowMode: the rule, in shadow mode
	}
	if r.Overridable { // the key's own limit, if it has one (limits.go)
		if or, ol := s.override(ctx, r, o.rule, entries); or != nil {
			o.rule, *l, o.configured = or, ol, r
		}
	}
	return r
}

// gone counts a request whose caller left before its answer (cerr, the
// context's error): each descriptor under a rule as client_gone, none as a
// store failure or a decision. It returns the error check returns.
func (s *Server) gone(domain string, descs []descriptor, outs []outcome, cerr error) error {
	for i := range outs {
		outs[i].gone = true
		s.count(domain, descs[i].entries, &outs[i])
	}
	return fmt.Errorf("%w: %w", errGone, cerr)
}

// count records one descriptor's outcome in the decision metrics, under the
// domain label domain.
func (s *Server) count(domain string, entries []config.Entry, o *outcome) {
	r := o.rule
	if r == nil {
		return
	}
	result := "ok"
	switch {
	case o.gone:
		result = "client_gone"
	case r.Unlimited:
		result = "unlimited"
	case o.failed && r.FailureMode == sluice.FailLocal && o.over:
		result = "failed_local_over_limit"
	case o.failed && r.FailureMode == sluice.FailLocal:
		result = "failed_local"
	case o.failed && o.decision.Allowed:
		result = "failed_open"
	case o.failed:
		result = "failed_closed"
	case o.over:
		result = "over_limit"
	case o.shadowOver:
		result = "shadow_over_limit"
	}
	policy := OverridePolicy
	if !o.override {
		policy = s.labels.name(r, entries)
	}
	s.metrics.decisions.WithLabelValues(domain, policy, result).Inc()
	s.quota.crossings.observe(domain, entries, o) // usage.go
	if o.gone {
		return // no decision to show
	}
	if o.configured != nil {
		r = o.configured
	}
	s.live.record(r, entries, o, s.now())
}

// storeKey is the key of a descriptor's state under its rule's policy: its
// entries, each length-prefixed so that no two descriptors share a key. At
// a level whose wildcard has share_threshold, the configured pattern stands
// for the value, so every value it matches shares one state; it is written
// with "*" after its length where a value has ":", so it cannot collide
// with any value, the pattern's own text included.
//
// That verbatim key is the store key when it is at most maxStoreKey bytes
// long. A longer one is replaced by its digest form (digestKey): '#' and the
// unpadded base64url SHA-256 of the verbatim key, 44 bytes. A verbatim key
// starts with a decimal digit (its first entry's key length), so no
// verbatim key is a digest form, and what a store holds per key is bounded
// whatever the descriptor's values.
func storeKey(r *config.Rule, entries []config.Entry) string {
	n := 0
	for i, e := range entries {
		v, _ := keyValue(r, i, e)
		n += decimalLen(len(e.Key)) + 1 + len(e.Key) + decimalLen(len(v)) + 1 + len(v)
	}
	if n > maxStoreKey {
		return digestKey(r, entries)
	}
	return string(appendKey(make([]byte, 0, n), r, entries))
}

// maxStoreKey is the longest verbatim store key; a longer one is stored in
// its digest form (storeKey). memstore holds a key's bytes past the 16th in
// an arena beside its row, so a key's memory grows with its length: at 1M
// keys (heap in use after a GC; memstore's BenchmarkMemoryKeyLength), keys
// of 64 bytes take 98 bytes each under gcra, 108 under fixed-window and 113
// under sliding-window, within the 128 bytes per key serve's --max-keys
// auto budgets (cmd/sluice/memory.go), where keys of 128 bytes would take
// 176 to 193. (sliding-log takes 134 at 64 bytes with one entry in its log;
// its memory grows with its log anyway.) A key in digest form is 44 bytes:
// 77 to 92 bytes per key (113 for sliding-log). 64 bytes still holds the
// usual descriptors verbatim: a remote_address with an IPv6 address as
// Envoy writes it (59 bytes at most), a user ID that is a UUID (45 bytes
// with the key "user").
const maxStoreKey = 64

// digestMark starts a store key in digest form; a verbatim key starts with
// a decimal digit.
const digestMark = '#'

// digestKeyLen is the length of a store key in digest form: the mark
// and 32 bytes in unpadded base64.
const digestKeyLen = 1 + (sha256.Size*8+5)/6

// keyValue is what the store key holds for entry i: the value and ':', or
// at a share_threshold level the configured pattern and '*'.
func keyValue(r *config.Rule, i int, e config.Entry) (string, byte) {
	if r != nil && i < len(r.Levels) && r.Levels[i].ShareThreshold {
		return r.Path[i].Value, '*'
	}
	return e.Value, ':'
}

// appendKey appends the verbatim store key of entries (storeKey) to b.
func appendKey(b []byte, r *config.Rule, entries []config.Entry) []byte {
	for i, e := range entries {
		v, sep := keyValue(r, i, e)
		b = strconv.AppendInt(b, int64(len(e.Key)), 10)
		b = append(b, ':')
		b = append(b, e.Key...)
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, sep)
		b = append(b, v...)
	}
	return b
}

// digestKey is the digest form of the verbatim store key of entries.
// SHA-256, a cryptographic hash with no seed: every process sharing a store
// computes the same key, and no client can make two descriptors share one
// state (and so one budget) on purpose.
func digestKey(r *config.Rule, entries []config.Entry) string {
	sum := hashKey(r, entries)
	var k [digestKeyLen]byte
	k[0] = digestMark
	base64.RawURLEncoding.Encode(k[1:], sum[:])
	return string(k[:])
}

// hashKey is the SHA-256 of the verbatim store key of entries (appendKey's
// bytes), written to the hash through a buffer of digestChunk bytes, so that
// a long value is never copied whole; nothing escapes, so it allocates
// nothing.
func hashKey(r *config.Rule, entries []config.Entry) [sha256.Size]byte {
	h := sha256.New()
	b := make([]byte, 0, digestChunk)
	room := func(m int) {
		if cap(b)-len(b) < m {
			h.Write(b)
			b = b[:0]
		}
	}
	write := func(s string) {
		for len(s) > 0 {
			room(1)
			c := copy(b[len(b):cap(b)], s)
			b, s = b[:len(b)+c], s[c:]
		}
	}
	for i, e := range entries {
		v, sep := keyValue(r, i, e)
		room(21)
		b = append(strconv.AppendInt(b, int64(len(e.Key)), 10), ':')
		write(e.Key)
		room(21)
		b = append(strconv.AppendInt(b, int64(len(v)), 10), sep)
		write(v)
	}
	h.Write(b)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// digestChunk is the size of the buffer hashKey writes through.
const digestChunk = 512

// decimalLen is the number of decimal digits of n ≥ 0.
func decimalLen(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// overrideRule is the rule of a descriptor (entries) that carries its own
// limit p, a fixed window, as in envoyproxy/ratelimit; m is the rule the
// descriptor matches, or nil. envoy keys a count by the domain, the
// descriptor's entries and the window's start, with no limit in it, so an
// override reads and adds to the count of every other limit of its unit on
// the descriptor. Here the state is keyed by the entries verbatim
// (storeKey), and shared through the policy's name (sluice.Policy: the same
// Name and Algorithm share per-key state, read with each one's limit):
//
//   - When m is a fixed-window rule of p's period that keeps its count
//     under one key (not sharded), p takes m's name and calendar: the
//     override and m count on one state, and m's failure mode applies. (A
//     share_threshold level keys m's count by the pattern and the
//     override's by the value, so those two stay apart, as envoy's keys do.)
//   - Otherwise p is named by the domain and its period alone: the
//     overrides of one period on a descriptor share a count, apart from any
//     rule's. Two periods never share one: in one state a request under
//     either would reset the other's count whenever their windows differ.
//
// The names leave the descriptor and the limit out, so a flood of
// overrides makes at most one policy per domain and period, however many
// limits and values it sends (memstore frees it once its keys expire). A
// limit of 0
// is a deny rule, as requests_per_unit 0 in a file: every hit is over (a
// peek is not), nothing is kept in the store, and its duration_until_reset
// is the time left in the window of its period.
func overrideRule(domain string, entries []config.Entry, p sluice.Policy, m *config.Rule) *config.Rule {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		if e.Value != "" {
			b.WriteByte('_')
			b.WriteString(e.Value)
		}
	}
	key := b.String()
	// The rule's title (current_limit.name, the headers) names the limit
	// and its period, never the request's values.
	title := fmt.Sprintf("override:%s:%d/%v", domain, p.Limit, p.Period)
	fm := config.DefaultFailureMode
	if sharesCount(m, p) {
		p.Name, p.Calendar, fm = m.Policy.Name, m.Policy.Calendar, m.FailureMode
	} else {
		p.Name = fmt.Sprintf("override:%s:%v", domain, p.Period)
	}
	unit, mult := unitOf(p.Period)
	r := &config.Rule{Domain: domain, FullKey: key, Name: title, Policy: p, Unit: unit, UnitMultiplier: mult, FailureMode: fm}
	if p.Limit == 0 {
		r.Deny, r.Policy = true, sluice.Policy{} // as config's deny rules: Policy is zero
	}
	return r
}

// sharesCount reports whether an override of policy p on a descriptor that
// matches rule m (nil: none) counts on m's state for it (overrideRule).
func sharesCount(m *config.Rule, p sluice.Policy) bool {
	return m != nil && m.InFlight == nil && !m.Unlimited && !m.Deny && m.Shards <= 1 &&
		m.Policy.Name != "" && m.Policy.Algorithm == p.Algorithm && m.Policy.Period == p.Period
}

// clampU32 converts n to uint32, saturating.
func clampU32(n int64) uint32 {
	switch {
	case n < 0:
		return 0
	case n > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}

// storeFailed counts a store failure of one request of domain (a domain
// label) and logs it; rules names the rule whose call failed (its title).
func (s *Server) storeFailed(domain string, err error, rules func() string) {
	var f storeFailures
	f.add(err, []string{domain + "/" + rules()})
	s.storeFailedRules(domain, &f)
}

// storeFailures is what store calls of one request failed: the rules, each
// once, as "domain/name", with the error of its last failed call.
type storeFailures struct {
	rules []batchNote
	err   error // the last failed call's; nil: none failed
}

// add notes a failed call (err) on rules.
func (f *storeFailures) add(err error, rules []string) {
	f.err = err
	for _, r := range rules {
		if i := slices.IndexFunc(f.rules, func(n batchNote) bool { return n.name == r }); i >= 0 {
			f.rules[i].detail = err
			continue
		}
		f.rules = append(f.rules, batchNote{name: r, detail: err})
	}
}

// storeFailedRules counts a request whose store calls failed (f; nothing
// when none did) and logs it, at most once a second (storeFailLog), so a
// dead store does not flood the log: the line names every rule that failed
// since the last one, as "domain/name", with the requests that failed on
// it, and the errors. The metric, the status and the line's
// failures_since_last_log count requests: a request counts once, however
// many of its calls failed (another round, the charge of a refused
// request, a shadow rule), and on each rule it failed on once.
func (s *Server) storeFailedRules(domain string, f *storeFailures) {
	if f.err == nil {
		return
	}
	s.metrics.storeErrors.WithLabelValues(domain).Inc()
	s.health.failed(s.now(), f.err)
	s.storeFailLog.add(f.rules...)
}

// logStoreFailures is storeFailLog's line.
func (s *Server) logStoreFailures(l *batchLine) {
	errText := func(d any) string {
		if err, ok := d.(error); ok {
			return err.Error()
		}
		return ""
	}
	s.log.Warn("store failed; the rules' failure modes decide", "rules", l.list(nil, "failures of other rules"),
		"error", l.details(errText), "failures_since_last_log", l.total)
}

// logEvery keeps a repeated log line to one a second, counting the
// occurrences in between.
type logEvery struct {
	pending atomic.Int64 // occurrences not yet logged
	last    atomic.Int64 // UnixNano of the last line, plus 1; 0: none yet
}

// due counts one occurrence at now (UnixNano) and reports whether to log a
// line now, with the occurrences since the last line: the first time, then
// at most once a second.
func (l *logEvery) due(now int64) (n int64, ok bool) {
	n = l.pending.Add(1)
	last := l.last.Load()
	if last != 0 && now+1-last < int64(time.Second) || !l.last.CompareAndSwap(last, now+1) {
		return 0, false
	}
	l.pending.Add(-n)
	return n, true
}

// ruleNames names the rules of outs[idx] (each once) as storeFailedRules
// does: "domain/name", the domain label and the rule's name as the metrics
// have them.
func (s *Server) ruleNames(domain string, outs []outcome, idx []int) []string {
	var names []string
	for _, i := range idx {
		r := outs[i].rule
		if r == nil {
			continue
		}
		name := OverridePolicy
		if !outs[i].override {
			name = r.Title()
		}
		name = domain + "/" + name
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// quotaCount counts a request's quota-mode descriptors and those of them
// over their quota. The request is refused when it has some and every one
// is over, as in envoyproxy/ratelimit; one with quota left admits it
// (unless an ordinary descriptor is over).
type quotaCount struct{ n, overN int }

func (q *quotaCount) add(r *config.Rule) {
	if r.QuotaMode {
		q.n++
	}
}

func (q *quotaCount) over(r *config.Rule) {
	if r.QuotaMode {
		q.overN++
	}
}

func (q *quotaCount) refuses() bool { return q.n > 0 && q.overN == q.n }
