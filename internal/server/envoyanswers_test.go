// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	envoytype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// These tests hold the RLS answers to envoyproxy/ratelimit's where sluice
// answered otherwise (issue 24, items 3 and 6 to 9).

const answersYAML = `domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1, name: base}
  - key: b
    rate_limit: {unlimited: true, replaces: [{name: base}]}
  - key: q
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token-bucket}
`

// TestEmptyDescriptorIsOK: an empty descriptor is OK and the request's
// other descriptors are decided. sluice answered InvalidArgument for the
// whole request, which Envoy turns into "allow" for every descriptor.
func TestEmptyDescriptorIsOK(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": answersYAML})
	for i, want := range []string{"OK: OK OK", "OVER: OK OVER"} {
		if got := codesOf(h.should(t, "d", &rlcommon.RateLimitDescriptor{}, desc("a", "x"))); got != want {
			t.Errorf("request %d: %s, want %s", i, got, want)
		}
	}
	code, body := h.post(t, "/v1/check", `{"domain":"d","descriptors":[{"entries":[]},{"entries":[{"key":"a","value":"x"}]}]}`)
	if code != 200 || !strings.Contains(body, `"overall_code":"OVER_LIMIT"`) {
		t.Errorf("HTTP: %d %s", code, body)
	}
}

// TestUnlimitedReplaces: an unlimited rule's replaces drops the rule it
// names, as in envoyproxy/ratelimit. sluice ignored it and refused the
// second request.
func TestUnlimitedReplaces(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": answersYAML})
	for i := range 3 {
		if got := codesOf(h.should(t, "d", desc("a", "x"), desc("b", "y"))); got != "OK: OK OK" {
			t.Errorf("request %d: %s", i, got)
		}
	}
}

// TestOverrideUnknownDomain: a descriptor's limit override in a domain no
// file defines is ignored, as envoyproxy/ratelimit ignores it (it looks the
// domain up first). sluice applied it: the second request was OVER.
func TestOverrideUnknownDomain(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": answersYAML})
	d := desc("a", "x")
	d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: envoytype.RateLimitUnit_MINUTE}
	for i := range 3 {
		if got := codesOf(h.should(t, "nowhere", d)); got != "OK: OK" {
			t.Errorf("request %d: %s", i, got)
		}
	}
	// In a domain a file defines, the override counts.
	if got := codesOf(h.should(t, "d", d, desc("b", "x"))); got != "OK: OK OK" {
		t.Errorf("known domain, first: %s", got)
	}
	if got := codesOf(h.should(t, "d", d)); got != "OVER: OVER" {
		t.Errorf("known domain, second: %s", got)
	}
}

// TestOverrideSharesTheDescriptorsCount: Envoy's routes send one
// descriptor (user=u1) with and without a `limit` override: the default
// route is limited by the file's rule, an expensive one carries an override
// of 2 a minute ("refuse here once this user has made 2 requests this
// minute"). envoyproxy/ratelimit keys a count by the domain, the
// descriptor's entries and the window alone (limiter/cache_key.go: the
// limit is not in the key), so the rule and every override of its unit
// read and add to one count. sluice kept a count per override size, so the
// expensive route admitted what envoy refuses.
func TestOverrideSharesTheDescriptorsCount(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"})
	override := func(rpu uint32) *rlcommon.RateLimitDescriptor {
		o := desc("user", "u1")
		o.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: envoytype.RateLimitUnit_MINUTE}
		return o
	}
	for range 2 {
		h.should(t, "d", desc("user", "u1")) // the default route
	}
	if r := h.should(t, "d", override(2)); r.GetOverallCode() != rls.RateLimitResponse_OVER_LIMIT {
		t.Errorf("override of 2 a minute after the user's 2 requests this minute: %s; envoy counts 3 > 2: OVER_LIMIT", codesOf(r))
	}
	h.clock.Advance(time.Minute)
	for range 3 {
		h.should(t, "d", override(5))
	}
	if r := h.should(t, "d", override(3)); r.GetOverallCode() != rls.RateLimitResponse_OVER_LIMIT {
		t.Errorf("override of 3 a minute after 3 requests under an override of 5: %s; envoy counts 4 > 3: OVER_LIMIT", codesOf(r))
	}
}

// TestOverrideCountsPerUnit: what an override shares, on memory and on
// Redis. Overrides of one unit on a descriptor no rule matches share its
// count too. An override of another unit than the rule's keeps a count of
// its own: one state for both would be reset by a request under either
// whenever their windows differ, so interleaving default-route requests
// would lift the override's limit. (envoy's keys of two units collide
// when their windows start at the same second; sluice's never do.)
func TestOverrideCountsPerUnit(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) func(*sluicetest.Clock) sluice.Store
	}{
		{"memory", func(t *testing.T) func(*sluicetest.Clock) sluice.Store {
			return func(c *sluicetest.Clock) sluice.Store {
				ms := memstore.New(memstore.WithClock(c))
				t.Cleanup(func() { ms.Close() })
				return ms
			}
		}},
		{"redis", func(t *testing.T) func(*sluicetest.Clock) sluice.Store {
			return redisOnClock(t, sluicetest.StartRedis(t))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := startOnClock(t, c.store(t), map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"}, io.Discard)
			h.clock.Advance(90 * time.Second) // the minute's window starts a minute after the hour's
			ask := func(key string, rpu uint32, unit envoytype.RateLimitUnit) *rls.RateLimitResponse {
				t.Helper()
				d := desc(key, "u1")
				if rpu > 0 {
					d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
				}
				r, err := rlsServer{s: h.srv}.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{d}})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			// The rule's count and the rule's unit: shared.
			ask("user", 0, 0)
			if r := ask("user", 2, envoytype.RateLimitUnit_MINUTE); codesOf(r) != "OK: OK" || r.Statuses[0].GetLimitRemaining() != 0 {
				t.Errorf("override of 2 a minute after 1 request under the rule: %s, remaining %d; want OK, 0", codesOf(r), r.Statuses[0].GetLimitRemaining())
			}
			// Another unit: a count of its own, which the rule's requests
			// between its own do not reset.
			for i, want := range []string{"OK: OK", "OK: OK", "OVER: OVER"} {
				ask("user", 0, 0)
				if got := codesOf(ask("user", 2, envoytype.RateLimitUnit_HOUR)); got != want {
					t.Errorf("override of 2 an hour, request %d, each after one under the rule: %s, want %s", i, got, want)
				}
			}
			if r := ask("user", 0, 0); codesOf(r) != "OK: OK" || r.Statuses[0].GetLimitRemaining() != 100-6 {
				t.Errorf("the rule after 5 of its own and 1 of a minute's override: %s, remaining %d; want OK, %d", codesOf(r), r.Statuses[0].GetLimitRemaining(), 100-6)
			}
			// No rule: the overrides of one unit share the descriptor's count.
			for range 3 {
				ask("nobody", 5, envoytype.RateLimitUnit_MINUTE)
			}
			if got := codesOf(ask("nobody", 3, envoytype.RateLimitUnit_MINUTE)); got != "OVER: OVER" {
				t.Errorf("no rule: override of 3 a minute after 3 under one of 5: %s, want OVER", got)
			}
		})
	}
}

// TestDurationUntilReset: whole seconds rounded up (Envoy truncates it into
// X-RateLimit-Reset); a zero-limit rule's and an idle fixed window's are
// the time left in the window, unit − now % unit, as envoyproxy/ratelimit
// sends. sluice sent 49.7 s, nothing, and 0 s.
func TestDurationUntilReset(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": answersYAML})
	h.clock.Advance(10*time.Second + 300*time.Millisecond)
	reset := func(ds ...*rlcommon.RateLimitDescriptor) []time.Duration {
		t.Helper()
		var out []time.Duration
		for _, st := range h.should(t, "d", ds...).GetStatuses() {
			if st.DurationUntilReset == nil {
				out = append(out, -1)
				continue
			}
			out = append(out, st.DurationUntilReset.AsDuration())
		}
		return out
	}
	check := func(name string, got []time.Duration, want ...time.Duration) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %v, want %v", name, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", name, got, want)
				return
			}
		}
	}
	check("fixed window, 49.7 s left", reset(desc("a", "r1")), 50*time.Second)
	check("zero limit", reset(desc("zero", "z")), 50*time.Second)
	// The request is refused by a; the quota-mode descriptor takes nothing,
	// and its window still ends in 50 s.
	check("refused, quota mode took nothing", reset(desc("a", "r1"), desc("q", "fresh")), 50*time.Second, 50*time.Second)
	check("quota mode, taken", reset(desc("q", "fresh")), 50*time.Second)
	// A token bucket's is the time until full, rounded up: 0.5 s → 1 s.
	check("token bucket", reset(desc("tb", "t")), time.Second)
}

// TestOverrideZeroLimitRefuses: a descriptor's limit override with
// requests_per_unit 0 is a limit of zero, as envoyproxy/ratelimit builds
// it: every hit of the descriptor is OVER_LIMIT with limit_remaining 0 and
// the time left in the window of the override's period, the request's
// other descriptors take nothing, a peek is OK (as for a zero-limit rule in
// a file), and the store is not touched. sluice answered InvalidArgument
// for the whole request, which Envoy turns into "allow". On memory and on
// Redis.
func TestOverrideZeroLimitRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) (func(*sluicetest.Clock) sluice.Store, func() int)
	}{
		{"memory", func(t *testing.T) (func(*sluicetest.Clock) sluice.Store, func() int) {
			var ms *memstore.Store
			return func(c *sluicetest.Clock) sluice.Store {
				ms = memstore.New(memstore.WithClock(c))
				t.Cleanup(func() { ms.Close() })
				return ms
			}, func() int { return ms.Len() }
		}},
		{"redis", func(t *testing.T) (func(*sluicetest.Clock) sluice.Store, func() int) {
			addr := sluicetest.StartRedis(t)
			rc := goredis.NewClient(&goredis.Options{Addr: addr})
			t.Cleanup(func() { rc.Close() })
			return redisOnClock(t, addr), func() int {
				n, err := rc.DBSize(context.Background()).Result()
				if err != nil {
					t.Fatal(err)
				}
				return int(n)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			newStore, keys := c.store(t)
			h := startOnClock(t, newStore, map[string]string{"d.yaml": answersYAML}, io.Discard)
			h.clock.Advance(10*time.Second + 300*time.Millisecond)
			rlsSrv := rlsServer{s: h.srv}
			zero := func(mult uint32) *rlcommon.RateLimitDescriptor {
				d := desc("a", "x")
				d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 0, Unit: envoytype.RateLimitUnit_MINUTE}
				if mult > 0 {
					d.Limit.UnitMultiplier = wrapperspb.UInt32(mult)
				}
				return d
			}
			ask := func(ds ...*rlcommon.RateLimitDescriptor) *rls.RateLimitResponse {
				t.Helper()
				r, err := rlsSrv.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "d", Descriptors: ds})
				if err != nil {
					t.Fatalf("override requests_per_unit 0: %v", err)
				}
				return r
			}
			for i := range 2 {
				r := ask(zero(0))
				st := r.Statuses[0]
				if got := codesOf(r); got != "OVER: OVER" || st.LimitRemaining != 0 || st.GetCurrentLimit().GetRequestsPerUnit() != 0 ||
					st.GetCurrentLimit().GetUnit() != rls.RateLimitResponse_RateLimit_MINUTE || st.DurationUntilReset.AsDuration() != 50*time.Second {
					t.Errorf("request %d: %s remaining %d limit %v reset %v, want OVER, 0, 0/minute, 50s", i, got, st.LimitRemaining, st.GetCurrentLimit(), st.DurationUntilReset.AsDuration())
				}
			}
			// A period of 2 minutes: 109.7 s left, rounded up.
			if r := ask(zero(2)); codesOf(r) != "OVER: OVER" || r.Statuses[0].DurationUntilReset.AsDuration() != 110*time.Second {
				t.Errorf("unit_multiplier 2: %s reset %v, want OVER, 110s", codesOf(r), r.Statuses[0].DurationUntilReset.AsDuration())
			}
			// The refused request's other descriptor takes nothing: a's
			// limit of 1 still admits one.
			if got := codesOf(ask(zero(0), desc("a", "y"))); got != "OVER: OVER OK" {
				t.Errorf("with another descriptor: %s", got)
			}
			if n := keys(); n != 0 {
				t.Errorf("%d keys in the store after zero-limit overrides, want none", n)
			}
			if got := codesOf(ask(desc("a", "y"))); got != "OK: OK" {
				t.Errorf("the other descriptor afterwards: %s, want OK (it took nothing)", got)
			}
			// A peek is OK, as for a zero-limit rule in a file.
			peek := zero(0)
			peek.HitsAddend = wrapperspb.UInt64(0)
			if got := codesOf(ask(peek)); got != "OK: OK" {
				t.Errorf("peek: %s", got)
			}
		})
	}
}
