// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

const liveYAML = `domain: api
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token-bucket, burst: 10}
  - key: bot
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: fixed-window}
`

func (h *harness) rules(t *testing.T) RulesResponse {
	t.Helper()
	var r RulesResponse
	if err := json.Unmarshal([]byte(h.get(t, "/v1/rules")), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func ruleNamed(t *testing.T, r RulesResponse, key string) RuleInfo {
	t.Helper()
	for _, ri := range r.Rules {
		if ri.Rule == key {
			return ri
		}
	}
	t.Fatalf("no rule %q in %+v", key, r.Rules)
	return RuleInfo{}
}

func TestRulesViewCountsAndNearLimit(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": liveYAML})
	h.clock.Set(t0.Add(1000 * time.Second))
	for range 12 {
		h.should(t, "api", desc("user", "ann"))
	}
	h.should(t, "api", desc("user", "bob"))
	h.clock.Advance(time.Second)
	for range 5 {
		h.should(t, "api", desc("bot", "crawler"))
	}
	r := h.rules(t)
	if r.Config.Version != 1 || !r.Config.LastReload.OK || r.HistorySeconds != HistorySeconds {
		t.Errorf("config %+v", r.Config)
	}
	u := ruleNamed(t, r, "api.user")
	if u.Algorithm != "token-bucket" || u.Limit != 5 || u.Burst != 10 || u.Period != 1 || u.FailureMode != "local" || u.Shadow {
		t.Errorf("rule %+v", u)
	}
	if u.Decisions != 13 || u.Refused != 2 {
		t.Errorf("decisions %d refused %d, want 13 and 2", u.Decisions, u.Refused)
	}
	// The series ends at now: 13 decisions one second ago, none now.
	n := len(u.Series.Decisions)
	if n != HistorySeconds || u.Series.Decisions[n-2] != 13 || u.Series.Refused[n-2] != 2 || u.Series.Decisions[n-1] != 0 {
		t.Errorf("series tail %v %v", u.Series.Decisions[n-3:], u.Series.Refused[n-3:])
	}
	if len(u.NearLimit) != 2 || u.NearLimit[0].Key != "user=ann" || u.NearLimit[0].Used < 1 || u.NearLimit[0].Refused != 2 || u.NearLimit[1].Key != "user=bob" || u.NearLimit[1].Used != 0.1 {
		t.Errorf("near limit %+v", u.NearLimit)
	}
	b := ruleNamed(t, r, "api.bot")
	if !b.Shadow || b.Decisions != 5 || b.Refused != 0 || b.ShadowRefused != 3 || b.Series.ShadowRefused[n-1] != 3 {
		t.Errorf("shadow rule %+v", b)
	}
	if len(b.NearLimit) != 1 || b.NearLimit[0].Refused != 3 {
		t.Errorf("shadow near limit %+v", b.NearLimit)
	}
	// /metrics: per rule, no keys.
	m := h.get(t, "/metrics")
	for _, want := range []string{`sluice_shadow_would_refuse_total{domain="api",rule="api.bot"} 3`, `sluice_rule_nearest_key_used_ratio{domain="api",rule="api.user"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, key := range []string{"ann", "bob", "crawler"} {
		if strings.Contains(m, key) {
			t.Errorf("/metrics names the key %q: label cardinality must not grow with keys", key)
		}
	}
}

// TestNearLimitIsBounded drives the near-limit table past its bound: it
// keeps NearLimitKeys keys, the nearest ones, and a stale key gives way.
func TestNearLimitIsBounded(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": liveYAML})
	// Key i takes i+1 of 10 tokens: the higher i, the nearer its limit.
	for i := range 3 * NearLimitKeys {
		for range i%10 + 1 {
			h.should(t, "api", desc("user", "u"+itoa(i)))
		}
	}
	u := ruleNamed(t, h.rules(t), "api.user")
	if len(u.NearLimit) != NearLimitKeys {
		t.Fatalf("%d keys tracked, want %d", len(u.NearLimit), NearLimitKeys)
	}
	for _, k := range u.NearLimit {
		if k.Used < 0.6 {
			t.Errorf("tracked %+v, which is further from its limit than keys left out", k)
		}
	}
	// A minute later every tracked key is stale: a key far from its
	// limit takes a place.
	h.clock.Advance(nearLimitStale + time.Second)
	h.should(t, "api", desc("user", "newcomer"))
	u = ruleNamed(t, h.rules(t), "api.user")
	found := false
	for _, k := range u.NearLimit {
		found = found || k.Key == "user=newcomer"
	}
	if !found || len(u.NearLimit) != NearLimitKeys {
		t.Errorf("after a minute, newcomer not tracked: %+v", u.NearLimit)
	}
}

// TestNearLimitCutsLongValues: the near-limit table keeps, and GET
// /v1/rules shows, at most NearLimitValueBytes of a value, marked as cut
// with the value's length; descriptors that differ only past the cut are
// still two keys; the table's copy shares no memory with the request.
func TestNearLimitCutsLongValues(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": liveYAML})
	// 1 MB values; byte 256 is inside an "é", so the cut keeps 255 bytes.
	long := func(i int) string { return strconv.Itoa(i) + strings.Repeat("é", 1<<19) }
	shown := func(v string) string { return "user=" + v[:255] + "…(cut from 1048577 bytes)" }
	for i := range NearLimitKeys {
		h.should(t, "api", desc("user", long(i)))
	}
	for range 10 { // 11 hits on a burst of 10: one refusal
		h.should(t, "api", desc("user", long(0)))
	}
	// Equal to long(0) but for its last character: another key, nearer its
	// limit than the eight others at 1 of 10, so it takes one's place.
	twin := long(0)[:len(long(0))-2] + "zz"
	for range 5 {
		h.should(t, "api", desc("user", twin))
	}
	body := h.get(t, "/v1/rules")
	if len(body) > 64<<10 {
		t.Errorf("/v1/rules is %d bytes, want at most 64 KiB", len(body))
	}
	var r RulesResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	u := ruleNamed(t, r, "api.user")
	if len(u.NearLimit) != NearLimitKeys {
		t.Fatalf("%d keys tracked, want %d", len(u.NearLimit), NearLimitKeys)
	}
	if k := u.NearLimit[0]; k.Key != shown(long(0)) || !k.Cut || k.Refused != 1 || k.Used < 1 {
		t.Errorf("nearest key %+v, want %q refused once", k, shown(long(0)))
	}
	if k := u.NearLimit[1]; k.Key != shown(twin) || !k.Cut || k.Refused != 0 || k.Used != 0.5 {
		t.Errorf("second key %+v, want the twin of the first at 0.5", k)
	}
	for _, k := range u.NearLimit[2:] {
		if !k.Cut || !strings.HasSuffix(k.Key, "…(cut from 1048577 bytes)") || len(k.Key) != len(shown(long(0))) || !utf8.ValidString(k.Key) || k.Used != 0.1 {
			t.Errorf("key %+v", k)
		}
	}

	// The table's own copy is bounded and shares no memory with the
	// request's value.
	v := long(7) + "x"
	entries := []config.Entry{{Key: "user", Value: v}}
	rule := h.srv.snap.Load().cfg.Match("api", entries)
	h.srv.live.record(rule, entries, &outcome{rule: rule, over: true}, h.clock.Now())
	st := (*h.srv.live.rules.Load())[rule]
	st.mu.Lock()
	defer st.mu.Unlock()
	found := false
	for _, k := range st.near {
		for _, e := range k.entries {
			if len(e.Value) > NearLimitValueBytes+len("…(cut from 1048577 bytes)") {
				t.Errorf("the table holds a value of %d bytes", len(e.Value))
			}
			p, base := uintptr(unsafe.Pointer(unsafe.StringData(e.Value))), uintptr(unsafe.Pointer(unsafe.StringData(v)))
			if p >= base && p < base+uintptr(len(v)) {
				t.Error("the table's copy points into the request's value")
			}
			found = found || e.Value == v[:255]+"…(cut from 1048578 bytes)"
		}
	}
	if !found {
		t.Error("the refused key was not tracked")
	}
}

func TestReloadStatusAndCountsSurviveReload(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": liveYAML})
	h.should(t, "api", desc("user", "ann"))
	writeFiles(t, h.dir, map[string]string{"api.yaml": "domain: api\ndescriptors: [{key: user, rate_limit: {unit: fortnight, requests_per_unit: 1}}]\n"})
	if err := h.srv.ReloadDir(h.dir); err == nil {
		t.Fatal("bad config loaded")
	}
	r := h.rules(t)
	if r.Config.Version != 1 || r.Config.LastReload.OK || !strings.Contains(r.Config.LastReload.Error, "fortnight") {
		t.Errorf("after a bad reload: %+v", r.Config)
	}
	writeFiles(t, h.dir, map[string]string{"api.yaml": strings.Replace(liveYAML, "requests_per_unit: 5", "requests_per_unit: 6", 1)})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	r = h.rules(t)
	u := ruleNamed(t, r, "api.user")
	if r.Config.Version != 2 || !r.Config.LastReload.OK || u.Limit != 6 || u.Decisions != 1 {
		t.Errorf("after a good reload: config %+v, rule %+v", r.Config, u)
	}
}

func TestSimulateEndpoint(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": liveYAML})
	code, body := h.post(t, "/v1/simulate", `{"domain":"api","rule":"api.user","pattern":"burst 12 at 0"}`)
	var resp SimulateResponse
	if code != 200 || json.Unmarshal([]byte(body), &resp) != nil {
		t.Fatalf("%d %s", code, body)
	}
	if resp.Admitted != 10 || resp.Refused != 2 || strings.Count(resp.SVG, `class="req refused"`) != 2 || !strings.HasPrefix(resp.SVG, "<svg") {
		t.Errorf("response %+v", resp)
	}
	// It never touched the real limits.
	if st := h.should(t, "api", desc("user", "k")); codesOf(st) != "OK: OK" || st.GetStatuses()[0].GetLimitRemaining() != 9 {
		t.Errorf("after a simulation, the real key k: %s remaining %d", codesOf(st), st.GetStatuses()[0].GetLimitRemaining())
	}
	code, body = h.post(t, "/v1/simulate", `{"algorithm":"sliding-log","limit":3,"period":"1s","pattern":"burst 4"}`)
	if code != 200 || !strings.Contains(body, `"refused":1`) {
		t.Errorf("policy simulation: %d %s", code, body)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"domain":"api","rule":"api.nope","pattern":"burst 1"}`, `no such rule`},
		{`{"domain":"api","rule":"api.user","pattern":"burst"}`, `pattern clause 1`},
		{`{"algorithm":"gcra","limit":0,"period":"1s","pattern":"burst 1"}`, `limit 0`},
		{`{"domain":"api","rule":"api.user","pattern":"1 every 1ms times 20000"}`, `more than the 10000`},
	} {
		code, body := h.post(t, "/v1/simulate", tc.body)
		if code == 200 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want an error containing %q", tc.body, code, body, tc.want)
		}
	}
}

func TestPageIsSelfContained(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": liveYAML})
	for _, path := range []string{"/", "/app.js", "/style.css"} {
		body := h.get(t, path)
		for _, ext := range []string{"http://", "https://", "//cdn"} {
			if i := strings.Index(body, ext); i >= 0 && !strings.HasPrefix(body[i:], "http://www.w3.org/2000/svg") {
				t.Errorf("%s refers to an external asset: %.60s", path, body[i:])
			}
		}
	}
}

// TestRulesViewGlobalShadowMode: under WithShadowMode (serve
// --shadow-mode) the live view still counts every rule's decisions, its
// would-be refusals as shadow refusals.
func TestRulesViewGlobalShadowMode(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": liveYAML}, WithShadowMode())
	h.clock.Set(t0.Add(1000 * time.Second))
	for range 12 {
		h.should(t, "api", desc("user", "ann"))
	}
	u := ruleNamed(t, h.rules(t), "api.user")
	if !u.Shadow {
		t.Errorf("rule %+v: not shown in shadow mode", u)
	}
	if u.Decisions != 12 || u.Refused != 0 || u.ShadowRefused != 2 {
		t.Errorf("decisions %d refused %d shadow refused %d, want 12, 0 and 2", u.Decisions, u.Refused, u.ShadowRefused)
	}
	if len(u.NearLimit) != 1 || u.NearLimit[0].Refused != 2 {
		t.Errorf("near limit %+v", u.NearLimit)
	}
}

// downStore is a store that fails every call, as deadStore, while down is
// set, and is its Store otherwise.
type downStore struct {
	sluice.Store
	down *atomic.Bool
}

func (s downStore) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	if s.down.Load() {
		return sluice.Decision{}, errDead
	}
	return s.Store.Take(ctx, p, key, cost)
}

func (s downStore) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	if s.down.Load() {
		return errDead
	}
	return s.Store.TakeAll(ctx, reqs, out)
}

// TestFailOpenIsNotNearLimit: during a store outage a rule's failure mode
// answers (open: remaining 0, admitted), and that answer is not the key's
// state. The keys nearest their limit (GET /v1/rules, the live page) and
// sluice_rule_nearest_key_used_ratio keep what the store last decided, and
// a key first seen during the outage is not listed; on main a fail-open
// answer listed the key at used 1 (100% of its limit) and set the metric to
// 1, so an alert "a key is at its limit" fired for every rule in any
// outage. The decisions still count in the rule's series.
func TestFailOpenIsNotNearLimit(t *testing.T) {
	for _, mode := range []string{"open", "closed", "local"} {
		t.Run(mode, func(t *testing.T) {
			var down atomic.Bool
			h := startOver(t, func(ms *memstore.Store) sluice.Store { return downStore{ms, &down} }, map[string]string{"gps.yaml": `domain: gps
descriptors:
  - key: city
    rate_limit: {unit: hour, requests_per_unit: 100, failure_mode: ` + mode + `, name: gps-ingest}
`})
			for range 30 {
				h.should(t, "gps", desc("city", "paris"))
			}
			down.Store(true)
			for range 5 {
				h.should(t, "gps", desc("city", "paris"))
				h.should(t, "gps", desc("city", "lyon"))
			}
			ri := ruleNamed(t, h.rules(t), "gps.city")
			if ri.Decisions != 40 {
				t.Errorf("decisions %d, want 40 (the failure mode's answers count as decisions)", ri.Decisions)
			}
			if len(ri.NearLimit) != 1 || ri.NearLimit[0].Key != "city=paris" || ri.NearLimit[0].Used != 0.3 || ri.NearLimit[0].Refused != 0 {
				t.Errorf("store down, fail %s: near limit %+v, want only city=paris at used 0.3 (30 of 100, the store's last decision)", mode, ri.NearLimit)
			}
			want := `sluice_rule_nearest_key_used_ratio{domain="gps",rule="gps-ingest"} 0.3`
			if m := h.get(t, "/metrics"); !strings.Contains(m, want+"\n") {
				t.Errorf("store down, fail %s: want %s; /metrics has:\n%s", mode, want, grepLines(m, "sluice_rule_nearest_key_used_ratio"))
			}
		})
	}
}
