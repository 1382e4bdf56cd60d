// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// t0 is a window boundary for every period the tests use.
var t0 = time.Unix(0, 0)

type harness struct {
	srv    *Server
	clock  *sluicetest.Clock
	client rls.RateLimitServiceClient
	http   *httptest.Server
	dir    string
}

// start runs a Server over memstore on a manual clock, its gRPC service on
// 127.0.0.1:0 with a real client, and its HTTP API, configured from yaml
// (file name → content) written to a temporary directory and loaded (no
// files: no configuration yet).
func start(t *testing.T, files map[string]string, opts ...Option) *harness {
	t.Helper()
	return startOver(t, nil, files, opts...)
}

// startOver is start with the server's store wrap(the memstore), or the
// memstore itself when wrap is nil.
func startOver(t *testing.T, wrap func(*memstore.Store) sluice.Store, files map[string]string, opts ...Option) *harness {
	t.Helper()
	h := &harness{clock: sluicetest.NewClock(t0), dir: t.TempDir()}
	writeFiles(t, h.dir, files)
	ms := memstore.New(memstore.WithClock(h.clock))
	t.Cleanup(func() { ms.Close() })
	var store sluice.Store = ms
	if wrap != nil {
		store = wrap(ms)
	}
	srv, err := New(store, append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv.now = h.clock.Now
	h.srv = srv
	if len(files) > 0 {
		if err := srv.ReloadDir(h.dir); err != nil {
			t.Fatal(err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.RegisterGRPC(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h.client = rls.NewRateLimitServiceClient(conn)
	h.http = httptest.NewServer(srv.Handler())
	t.Cleanup(h.http.Close)
	return h
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (h *harness) should(t *testing.T, domain string, ds ...*rlcommon.RateLimitDescriptor) *rls.RateLimitResponse {
	t.Helper()
	resp, err := h.client.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: domain, Descriptors: ds})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// codes returns the overall code and each status's code, as "OK" or "OVER".
func codesOf(r *rls.RateLimitResponse) string {
	short := func(c rls.RateLimitResponse_Code) string {
		if c == rls.RateLimitResponse_OVER_LIMIT {
			return "OVER"
		}
		return c.String()
	}
	s := short(r.GetOverallCode()) + ":"
	for _, st := range r.GetStatuses() {
		s += " " + short(st.GetCode())
	}
	return s
}

const ridesYAML = `domain: rides
descriptors:
  - key: rider
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token-bucket, burst: 3, name: rider}
  - key: route
    value: /quotes
    descriptors:
      - key: rider
        rate_limit: {unit: minute, requests_per_unit: 2}
  - key: city
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: city
    value: atlantis
    rate_limit: {unlimited: true}
  - key: tester
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
`

func TestExactAdmissionUnderConcurrency(t *testing.T) {
	h := start(t, map[string]string{"a.yaml": `domain: d
descriptors:
  - key: k
    rate_limit: {unit: day, requests_per_unit: 1000}
`})
	const clients, perClient = 64, 40
	var ok, over atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perClient; i++ {
				resp, err := h.client.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", "one")}})
				if err != nil {
					t.Error(err)
					return
				}
				if resp.GetOverallCode() == rls.RateLimitResponse_OK {
					ok.Add(1)
				} else {
					over.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1000 || over.Load() != clients*perClient-1000 {
		t.Errorf("admitted %d, refused %d; want exactly 1000 and %d", ok.Load(), over.Load(), clients*perClient-1000)
	}
}

func TestNestedAndStatuses(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	// The nested rule: 2 per minute for one rider on /quotes.
	for i, want := range []string{"OK: OK", "OK: OK", "OVER: OVER"} {
		r := h.should(t, "rides", desc("route", "/quotes", "rider", "r1"))
		if got := codesOf(r); got != want {
			t.Errorf("quote %d: %s, want %s", i, got, want)
		}
	}
	// Another rider, and the same rider on another route, are separate.
	if got := codesOf(h.should(t, "rides", desc("route", "/quotes", "rider", "r2"))); got != "OK: OK" {
		t.Errorf("r2: %s", got)
	}
	r := h.should(t, "rides", desc("route", "/trips", "rider", "r1"))
	if got := codesOf(r); got != "OK: OK" || r.Statuses[0].CurrentLimit != nil {
		t.Errorf("no rule for /trips: %s %v", got, r.Statuses[0])
	}
	// The window turns over.
	h.clock.Advance(time.Minute)
	st := h.should(t, "rides", desc("route", "/quotes", "rider", "r1")).Statuses[0]
	if st.Code != rls.RateLimitResponse_OK || st.CurrentLimit.GetRequestsPerUnit() != 2 || st.CurrentLimit.GetUnit() != rls.RateLimitResponse_RateLimit_MINUTE || st.LimitRemaining != 1 || st.DurationUntilReset.AsDuration() != time.Minute {
		t.Errorf("status after a minute: %v", st)
	}
	// Token bucket: burst 3, then over; the status says how long until full
	// (1.5 s), in whole seconds rounded up as Envoy's header needs.
	for i := 0; i < 3; i++ {
		h.should(t, "rides", desc("rider", "r9"))
	}
	st = h.should(t, "rides", desc("rider", "r9")).Statuses[0]
	if st.Code != rls.RateLimitResponse_OVER_LIMIT || st.LimitRemaining != 0 || st.CurrentLimit.GetName() != "rider" || st.DurationUntilReset.AsDuration() != 2*time.Second {
		t.Errorf("token bucket over: %v", st)
	}
	// Unlimited and deny rules.
	st = h.should(t, "rides", desc("city", "atlantis")).Statuses[0]
	if st.Code != rls.RateLimitResponse_OK || st.CurrentLimit != nil || st.LimitRemaining != 1<<32-1 {
		t.Errorf("unlimited: %v", st)
	}
	if got := codesOf(h.should(t, "rides", desc("blocked", "x"))); got != "OVER: OVER" {
		t.Errorf("requests_per_unit 0: %s", got)
	}
	// An unknown domain is OK, as in envoyproxy/ratelimit.
	if got := codesOf(h.should(t, "nowhere", desc("rider", "r1"))); got != "OK: OK" {
		t.Errorf("unknown domain: %s", got)
	}
}

func TestAllOrNothing(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	// Use up r1's quote quota (2 per minute).
	for i := 0; i < 2; i++ {
		h.should(t, "rides", desc("route", "/quotes", "rider", "r1"))
	}
	// A request with r1's rider limit (fine) and its quote limit (over):
	// refused, and the rider limit consumes nothing.
	for i := 0; i < 5; i++ {
		r := h.should(t, "rides", desc("rider", "r1"), desc("route", "/quotes", "rider", "r1"), desc("city", "paris"))
		if got := codesOf(r); got != "OVER: OK OVER OK" {
			t.Fatalf("attempt %d: %s", i, got)
		}
		if r.Statuses[0].LimitRemaining != 3 || r.Statuses[2].LimitRemaining != 100 {
			t.Fatalf("attempt %d: the refused request consumed: %v", i, r.Statuses)
		}
	}
	// Peek: still a full bucket for r1 and an untouched city.
	r := h.peek(t, "rides", desc("rider", "r1"), desc("city", "paris"))
	if got := codesOf(r); got != "OK: OK OK" || r.Statuses[0].LimitRemaining != 3 || r.Statuses[1].LimitRemaining != 100 {
		t.Errorf("after refusals: %s %v", got, r.Statuses)
	}
	// A zero-limit (deny) descriptor refuses the whole request too.
	r = h.should(t, "rides", desc("rider", "r1"), desc("blocked", "x"))
	if got := codesOf(r); got != "OVER: OK OVER" || r.Statuses[0].LimitRemaining != 3 {
		t.Errorf("deny: %s %v", got, r.Statuses)
	}
	// Admitted together, both consume.
	r = h.should(t, "rides", desc("rider", "r1"), desc("city", "paris"))
	if got := codesOf(r); got != "OK: OK OK" || r.Statuses[0].LimitRemaining != 2 || r.Statuses[1].LimitRemaining != 99 {
		t.Errorf("admitted: %s %v", got, r.Statuses)
	}
}

// peek asks with every descriptor's hits_addend set to 0.
func (h *harness) peek(t *testing.T, domain string, ds ...*rlcommon.RateLimitDescriptor) *rls.RateLimitResponse {
	t.Helper()
	for _, d := range ds {
		d.HitsAddend = wrapperspb.UInt64(0)
	}
	return h.should(t, domain, ds...)
}

func TestPeeksAndHits(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	for i := 0; i < 10; i++ {
		if r := h.peek(t, "rides", desc("city", "rome")); codesOf(r) != "OK: OK" || r.Statuses[0].LimitRemaining != 100 {
			t.Fatalf("peek %d: %v", i, r)
		}
	}
	// Request-level hits_addend applies to every descriptor.
	r, err := h.client.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "rides", Descriptors: []*rlcommon.RateLimitDescriptor{desc("city", "rome")}, HitsAddend: 40})
	if err != nil || r.Statuses[0].LimitRemaining != 60 {
		t.Fatalf("hits_addend 40: %v %v", r, err)
	}
	// A descriptor's own hits_addend overrides it.
	d := desc("city", "rome")
	d.HitsAddend = wrapperspb.UInt64(61)
	r, err = h.client.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "rides", Descriptors: []*rlcommon.RateLimitDescriptor{d}, HitsAddend: 1})
	if err != nil || codesOf(r) != "OVER: OVER" || r.Statuses[0].LimitRemaining != 60 {
		t.Fatalf("61 of 60: %v %v", r, err)
	}
	if r := h.peek(t, "rides", desc("city", "rome")); r.Statuses[0].LimitRemaining != 60 {
		t.Errorf("a refusal consumed: %v", r)
	}
	// A peek at an exhausted limit is OVER_LIMIT (a hit would be) and
	// reports 0 remaining, as envoyproxy/ratelimit answers hits_addend 0.
	h.should(t, "rides", desc("route", "/quotes", "rider", "p"))
	h.should(t, "rides", desc("route", "/quotes", "rider", "p"))
	if r := h.peek(t, "rides", desc("route", "/quotes", "rider", "p")); codesOf(r) != "OVER: OVER" || r.Statuses[0].LimitRemaining != 0 {
		t.Errorf("peek at an exhausted limit: %v", r)
	}
}

func TestShadowMode(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	for i := 0; i < 3; i++ {
		if got := codesOf(h.should(t, "rides", desc("tester", "t1"), desc("city", "oslo"))); got != "OK: OK OK" {
			t.Errorf("shadow %d: %s", i, got)
		}
	}
	// The shadow rule counted: 1 ok, 2 over, and the city took all 3.
	if r := h.peek(t, "rides", desc("city", "oslo")); r.Statuses[0].LimitRemaining != 97 {
		t.Errorf("city: %v", r.Statuses[0])
	}
	body := h.get(t, "/metrics")
	for _, want := range []string{
		`sluice_decisions_total{domain="rides",policy="rides.tester",result="ok"} 1`,
		`sluice_decisions_total{domain="rides",policy="rides.tester",result="shadow_over_limit"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// When the enforced part refuses, the shadow rule takes nothing.
	h.srv.Apply(h.srv.Config()) // same config, new snapshot: state is kept
	for i := 0; i < 2; i++ {
		h.should(t, "rides", desc("route", "/quotes", "rider", "s"))
	}
	h.clock.Advance(time.Minute) // the shadow window turns over; the quotes window too
	for i := 0; i < 2; i++ {
		h.should(t, "rides", desc("route", "/quotes", "rider", "s"))
	}
	if got := codesOf(h.should(t, "rides", desc("tester", "t2"), desc("route", "/quotes", "rider", "s"))); got != "OVER: OK OVER" {
		t.Errorf("refused with shadow: %s", got)
	}
	if r := h.peek(t, "rides", desc("tester", "t2")); r.Statuses[0].LimitRemaining != 1 {
		t.Errorf("the shadow rule consumed on a refused request: %v", r.Statuses[0])
	}
}

func TestReplaces(t *testing.T) {
	h := start(t, map[string]string{"plans.yaml": `domain: plans
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 1}
  - key: plan
    value: gold
    rate_limit: {name: gold, unit: minute, requests_per_unit: 3, replaces: [{name: per_user}]}
`})
	for i := 0; i < 3; i++ {
		r := h.should(t, "plans", desc("user", "u"), desc("plan", "gold"))
		if got := codesOf(r); got != "OK: OK OK" || r.Statuses[0].CurrentLimit != nil {
			t.Errorf("gold %d: %s %v", i, got, r.Statuses)
		}
	}
	if got := codesOf(h.should(t, "plans", desc("user", "u"), desc("plan", "gold"))); got != "OVER: OK OVER" {
		t.Errorf("gold exhausted: %s", got)
	}
	// Without the gold descriptor, per_user applies, and was never used.
	for i, want := range []string{"OK: OK", "OVER: OVER"} {
		if got := codesOf(h.should(t, "plans", desc("user", "u"))); got != want {
			t.Errorf("per_user %d: %s, want %s", i, got, want)
		}
	}
}

func TestHotReload(t *testing.T) {
	h := start(t, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2, name: k}\n"})
	h.should(t, "d", desc("k", "v"))
	// Raise the limit: state is kept (the rule's key is unchanged).
	writeFiles(t, h.dir, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5, name: k}\n"})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	r := h.should(t, "d", desc("k", "v"))
	if r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 || r.Statuses[0].LimitRemaining != 3 {
		t.Errorf("after reload: %v", r.Statuses[0])
	}
	// A bad file: the old configuration stays, the failure is counted.
	writeFiles(t, h.dir, map[string]string{"b.yaml": "domain: e\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"})
	err := h.srv.ReloadDir(h.dir)
	if err == nil || !strings.Contains(err.Error(), `b.yaml:4: descriptors[0].rate_limit.unit: "fortnight"`) {
		t.Fatalf("bad reload: %v", err)
	}
	r = h.should(t, "d", desc("k", "v"))
	if r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 || r.Statuses[0].LimitRemaining != 2 {
		t.Errorf("after a bad reload: %v", r.Statuses[0])
	}
	body := h.get(t, "/metrics")
	for _, want := range []string{
		`sluice_config_reloads_total{result="failure"} 1`,
		`sluice_config_reloads_total{result="success"} 2`,
		"sluice_config_last_reload_successful 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Fixed: the new domain loads.
	writeFiles(t, h.dir, map[string]string{"b.yaml": "domain: e\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	if got := codesOf(h.should(t, "e", desc("k", "v"), desc("k", "v"))); got != "OVER: OK OVER" {
		t.Errorf("new domain: %s", got)
	}
}

// TestReloadUnderLoad swaps configurations while 16 clients decide; run
// with -race. Every answer must come from one of the two configurations.
func TestReloadUnderLoad(t *testing.T) {
	a := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n"
	b := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2000000}\n"
	h := start(t, map[string]string{"a.yaml": a})
	ca, err := config.Load(mapFS("a.yaml", a))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := config.Load(mapFS("a.yaml", b))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var answered atomic.Int64
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r, err := h.client.ShouldRateLimit(ctx, &rls.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", "v")}})
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				answered.Add(1)
				if n := r.Statuses[0].CurrentLimit.GetRequestsPerUnit(); r.OverallCode != rls.RateLimitResponse_OK || (n != 1000000 && n != 2000000) {
					t.Errorf("answer %v", r)
					return
				}
			}
		}()
	}
	// Swap at least 200 times, and until the clients got 2000 answers.
	for i := 0; i < 200 || answered.Load() < 2000; i++ {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		if err := h.srv.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
}

// watch runs Watch on dir, with serve's default debounce, until the test
// ends, and returns the results of its reloads.
func (h *harness) watch(t *testing.T, dir string) <-chan error {
	results := make(chan error, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.srv.Watch(ctx, dir, DefaultReloadDebounce, func(err error) { results <- err }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return results
}

// TestWatchRelevant: what the watcher reloads for.
func TestWatchRelevant(t *testing.T) {
	for name, want := range map[string]bool{
		"a.yaml": true, "b.yml": true, "..data": true, "..2026_11_25_07_00_00.123": true, "..data_tmp": true,
		"sluice.log": false, ".a.yaml.swp": false, "a.yaml~": false, "4913": false, ".a.yaml.tmp": false,
	} {
		if got := relevant(name); got != want {
			t.Errorf("relevant(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestWatcherCatchesUp: a change made before the watch began raises no
// event; Watch's catch-up load puts it in force.
func TestWatcherCatchesUp(t *testing.T) {
	h := start(t, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"})
	if h.srv.dirChanged(h.dir) {
		t.Fatal("the directory just loaded counts as changed")
	}
	writeFiles(t, h.dir, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"})
	if !h.srv.dirChanged(h.dir) {
		t.Fatal("a rewritten file does not count as a change")
	}
	results := h.watch(t, h.dir)
	select {
	case err := <-results:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the change made before the watch was never loaded")
	}
	if n := h.peek(t, "d", desc("k", "v")).Statuses[0].CurrentLimit.GetRequestsPerUnit(); n != 3 {
		t.Errorf("limit %d after the catch-up, want 3", n)
	}
	if h.srv.dirChanged(h.dir) {
		t.Error("the directory counts as changed after it was loaded")
	}
	writeFiles(t, h.dir, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: x}\n"})
	if !h.srv.dirChanged(h.dir) {
		t.Error("a directory that does not load does not count as a change")
	}
}

// TestWatcherDirReplaced: the config directory removed and made again, then
// a config path that is a symlink pointed at another directory: each time
// the watcher watches the new directory and reloads.
func TestWatcherDirReplaced(t *testing.T) {
	h := start(t, nil)
	root := t.TempDir()
	cfgAt := func(dir string, n int) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, dir, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + itoa(n) + "}\n"})
	}
	limitOf := func() uint32 {
		return h.peek(t, "d", desc("k", "v")).Statuses[0].CurrentLimit.GetRequestsPerUnit()
	}
	for _, tc := range []struct {
		name    string
		dir     string             // what Watch is given
		prepare func()             // makes dir, with limit 1
		replace func() (gone bool) // replaces dir, with limit 5
	}{
		{"removed and made again", filepath.Join(root, "cfg"),
			func() { cfgAt(filepath.Join(root, "cfg"), 1) },
			func() bool {
				if err := os.RemoveAll(filepath.Join(root, "cfg")); err != nil {
					t.Fatal(err)
				}
				return true
			}},
		{"symlink pointed elsewhere", filepath.Join(root, "link"),
			func() {
				cfgAt(filepath.Join(root, "v1"), 1)
				if err := os.Symlink("v1", filepath.Join(root, "link")); err != nil {
					t.Fatal(err)
				}
			},
			func() bool {
				cfgAt(filepath.Join(root, "v2"), 5)
				if err := os.Symlink("v2", filepath.Join(root, "link.tmp")); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(filepath.Join(root, "link.tmp"), filepath.Join(root, "link")); err != nil {
					t.Fatal(err)
				}
				return false
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.prepare()
			if err := h.srv.ReloadDir(tc.dir); err != nil {
				t.Fatal(err)
			}
			results := h.watch(t, tc.dir)
			// waitFor waits (bounded) for the limit to be n, consuming
			// reload results; with failed, for a failed reload.
			waitFor := func(n uint32, failed bool) {
				t.Helper()
				deadline := time.After(20 * time.Second)
				for limitOf() != n || failed {
					select {
					case err := <-results:
						failed = failed && err == nil
					case <-deadline:
						t.Fatalf("no reload to limit %d (now %d; failed reload awaited: %v)", n, limitOf(), failed)
					}
				}
			}
			// Until the watcher is watching, a rewrite may go unseen:
			// rewrite until seen.
			deadline := time.After(20 * time.Second)
			for limitOf() != 2 {
				writeFiles(t, tc.dir, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"})
				select {
				case <-results:
				case <-deadline:
					t.Fatal("the watcher never reloaded")
				}
			}
			if tc.replace() {
				waitFor(2, true) // gone: a failed reload, and 2 stays
				cfgAt(tc.dir, 5)
			}
			waitFor(5, false)
			// And it watches the new directory.
			writeFiles(t, tc.dir, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 6}\n"})
			waitFor(6, false)
		})
	}
}

// TestWatcher reloads through the directory watcher, with a bounded wait:
// an atomic rename, then a Kubernetes-style ..data symlink swap.
func TestWatcher(t *testing.T) {
	h := start(t, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"})
	results := h.watch(t, h.dir)
	limitOf := func() uint32 {
		return h.peek(t, "d", desc("k", "v")).Statuses[0].CurrentLimit.GetRequestsPerUnit()
	}
	// waitFor waits (bounded) for the configuration to have limit n,
	// consuming reload results.
	waitFor := func(n uint32) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for limitOf() != n {
			select {
			case <-results:
			case <-deadline:
				t.Fatalf("no reload to limit %d (now %d)", n, limitOf())
			}
		}
	}
	// The watcher may need a moment to be watching: rewrite until seen.
	tmp := filepath.Join(h.dir, ".a.yaml.tmp")
	rename := func(n int) {
		t.Helper()
		writeFiles(t, h.dir, map[string]string{".a.yaml.tmp": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + itoa(n) + "}\n"})
		if err := os.Rename(tmp, filepath.Join(h.dir, "a.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(20 * time.Second)
	for limitOf() != 7 {
		rename(7)
		select {
		case <-results:
		case <-deadline:
			t.Fatal("the watcher never reloaded")
		}
	}

	// A ConfigMap: a.yaml becomes a symlink through ..data, then ..data is
	// swapped to a new timestamped directory.
	mk := func(ts string, n int) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(h.dir, ts), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, filepath.Join(h.dir, ts), map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + itoa(n) + "}\n"})
	}
	mk("..v1", 11)
	if err := os.Symlink("..v1", filepath.Join(h.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/a.yaml", filepath.Join(h.dir, ".a.link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(h.dir, ".a.link"), filepath.Join(h.dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(11)
	mk("..v2", 13)
	if err := os.Symlink("..v2", filepath.Join(h.dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(h.dir, "..data_tmp"), filepath.Join(h.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	waitFor(13)
	// A bad swap keeps 13 and reports the error.
	mk("..v3", -1)
	if err := os.Symlink("..v3", filepath.Join(h.dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(h.dir, "..data_tmp"), filepath.Join(h.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-results:
		for err == nil { // a reload of the earlier state may still be queued
			select {
			case err = <-results:
			case <-time.After(20 * time.Second):
				t.Fatal("no failed reload reported")
			}
		}
		if !strings.Contains(err.Error(), "requests_per_unit: -1") {
			t.Errorf("bad swap: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reload after a bad swap")
	}
	if n := limitOf(); n != 13 {
		t.Errorf("after a bad swap the limit is %d, want 13", n)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func mapFS(name, content string) fstest.MapFS {
	return fstest.MapFS{name: {Data: []byte(content)}}
}

func (h *harness) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get(h.http.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, b)
	}
	return string(b)
}

func (h *harness) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(h.http.URL+path, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHTTPAPI(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	check := func(body string) (int, CheckResponse) {
		t.Helper()
		code, s := h.post(t, "/v1/check", body)
		var r CheckResponse
		if code == http.StatusOK {
			if err := json.Unmarshal([]byte(s), &r); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		return code, r
	}
	rider := `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"h1"}]}]`
	for i := 0; i < 3; i++ {
		if code, r := check(rider + "}"); code != 200 || !r.Allowed || r.Statuses[0].Remaining != int64(2-i) {
			t.Fatalf("check %d: %d %+v", i, code, r)
		}
	}
	code, r := check(rider + "}")
	want := JSONStatus{Code: "OVER_LIMIT", Rule: "rides.rider", Name: "rider", Algorithm: "token-bucket", Limit: 2, RetryAfter: 0.5, ResetAfter: 1.5}
	if code != 200 || r.Allowed || r.OverallCode != "OVER_LIMIT" || !reflect.DeepEqual(r.Statuses[0], want) {
		t.Errorf("over: %d %+v", code, r)
	}
	// Peek: refused, as a hit would be.
	if code, r := check(rider + `,"hits_addend":0}`); code != 200 || r.Allowed || r.Statuses[0].Remaining != 0 || r.Statuses[0].RetryAfter != 0.5 {
		t.Errorf("peek: %d %+v", code, r)
	}
	// Reset, then the bucket is full again.
	if code, s := h.post(t, "/v1/reset", `{"domain":"rides","entries":[{"key":"rider","value":"h1"}]}`); code != 200 || !strings.Contains(s, `"reset":"rides.rider"`) {
		t.Fatalf("reset: %d %s", code, s)
	}
	if code, r := check(rider + `,"hits_addend":0}`); code != 200 || r.Statuses[0].Remaining != 3 {
		t.Errorf("after reset: %d %+v", code, r)
	}
	// Another rider was not reset... and the reset key works on.
	if code, r := check(rider + "}"); code != 200 || r.Statuses[0].Remaining != 2 {
		t.Errorf("use after reset: %d %+v", code, r)
	}
	if code, _ := h.post(t, "/v1/reset", `{"domain":"rides","entries":[{"key":"nothing","value":"x"}]}`); code != 404 {
		t.Errorf("reset with no rule: %d", code)
	}
	for _, bad := range []string{
		`{"domain":"rides"}`,
		`{"descriptors":[{"entries":[{"key":"a","value":"b"}]}]}`,
		`{"domain":"rides","descriptors":[{"entries":[{"key":"a","value":"b"}]}],"hits_addend":-1}`,
		`{"domain":"rides","descriptors":[],"colour":"red"}`,
		`not json`,
	} {
		if code, s := h.post(t, "/v1/check", bad); code != 400 || !strings.Contains(s, `"error"`) {
			t.Errorf("%s: %d %s", bad, code, s)
		}
	}
	if body := h.get(t, "/healthz"); body != "ok\n" {
		t.Errorf("healthz: %q", body)
	}
	if body := h.get(t, "/readyz"); body != "ready\n" {
		t.Errorf("readyz: %q", body)
	}
	metrics := h.get(t, "/metrics")
	for _, want := range []string{
		`sluice_decisions_total{domain="rides",policy="rider",result="over_limit"} 2`, // the hit and the peek
		`sluice_decision_duration_seconds_count{api="http"}`,
		`sluice_store_errors_total`,
		"sluice_config_last_reload_successful 1",
		"sluice_config_last_reload_success_timestamp_seconds",
	} {
		if want == "sluice_store_errors_total" {
			continue // a counter vector with no errors has no series yet
		}
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	h.srv.SetStopping()
	resp, err := http.Get(h.http.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz while stopping: %s", resp.Status)
	}
}

// TestHTTPBodyTooLarge: a body over the 1 MiB limit answers 413, saying so.
func TestHTTPBodyTooLarge(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	big := `{"domain":"` + strings.Repeat("x", maxBody) + `"}`
	for _, path := range []string{"/v1/check", "/v1/reset", "/v1/simulate"} {
		code, body := h.post(t, path, big)
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"error":"body: http: request body too large"`) {
			t.Errorf("%s with %d bytes: %d %s", path, len(big), code, body)
		}
	}
	// Just under the limit is read (and then judged on its content).
	if code, body := h.post(t, "/v1/check", `{"domain":"`+strings.Repeat("x", maxBody-len(`{"domain":""}`))+`"}`); code != http.StatusBadRequest || !strings.Contains(body, "descriptors: must not be empty") {
		t.Errorf("/v1/check with %d bytes: %d %s", maxBody, code, body)
	}
}

// TestHTTPRoutes: a known path asked with the wrong method answers 405 and
// says which methods it takes; an unknown path answers 404; the live page
// and its files are served.
func TestHTTPRoutes(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	for _, tc := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{"GET", "/v1/check", http.StatusMethodNotAllowed, "POST"},
		{"GET", "/v1/reset", http.StatusMethodNotAllowed, "POST"},
		{"GET", "/v1/simulate", http.StatusMethodNotAllowed, "POST"},
		{"PUT", "/v1/check", http.StatusMethodNotAllowed, "POST"},
		{"POST", "/v1/rules", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"POST", "/", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"POST", "/app.js", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"GET", "/nope", http.StatusNotFound, ""},
		{"GET", "/v1/nope", http.StatusNotFound, ""},
		{"GET", "/", http.StatusOK, ""},
		{"GET", "/app.js", http.StatusOK, ""},
		{"GET", "/style.css", http.StatusOK, ""},
	} {
		req, err := http.NewRequest(tc.method, h.http.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %s, Allow %q; want %d, Allow %q", tc.method, tc.path, resp.Status, resp.Header.Get("Allow"), tc.code, tc.allow)
		}
	}
}

func TestNotReadyWithoutConfig(t *testing.T) {
	srv, err := New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("readyz without config: %d", rec.Code)
	}
	_, err = rlsServer{s: srv}.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", "v")}})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("ShouldRateLimit without config: %v", err)
	}
	c, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(c); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("readyz with defaults: %d", rec.Code)
	}
}

func TestBadRequests(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	neg := desc("rider", "x")
	neg.HitsAddend = wrapperspb.UInt64(1)
	neg.IsNegativeHits = true
	for name, req := range map[string]*rls.RateLimitRequest{
		"no domain":      {Descriptors: []*rlcommon.RateLimitDescriptor{desc("a", "b")}},
		"no descriptors": {Domain: "rides"},
		"negative hits":  {Domain: "rides", Descriptors: []*rlcommon.RateLimitDescriptor{neg}},
	} {
		if _, err := h.client.ShouldRateLimit(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestNegativeHitsRefused: is_negative_hits (a refund) is refused with
// InvalidArgument naming the descriptor and the field, whether the hits are
// the descriptor's own hits_addend, the request's, or the default 1, and on
// an empty descriptor too. Without a descriptor hits_addend it was taken as
// a hit: the refund spent the budget it meant to give back.
func TestNegativeHitsRefused(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	neg := func(kv ...string) *rlcommon.RateLimitDescriptor {
		d := desc(kv...)
		d.IsNegativeHits = true
		return d
	}
	own := neg("rider", "x")
	own.HitsAddend = wrapperspb.UInt64(1)
	for name, req := range map[string]*rls.RateLimitRequest{
		"descriptor hits_addend": {Domain: "rides", Descriptors: []*rlcommon.RateLimitDescriptor{desc("rider", "y"), own}},
		"request hits_addend":    {Domain: "rides", HitsAddend: 1, Descriptors: []*rlcommon.RateLimitDescriptor{desc("rider", "y"), neg("rider", "x")}},
		"no hits_addend":         {Domain: "rides", Descriptors: []*rlcommon.RateLimitDescriptor{desc("rider", "y"), neg("rider", "x")}},
		"empty descriptor":       {Domain: "rides", Descriptors: []*rlcommon.RateLimitDescriptor{desc("rider", "y"), neg()}},
	} {
		_, err := h.client.ShouldRateLimit(context.Background(), req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "descriptors[1]: is_negative_hits:") {
			t.Errorf("%s: %v, want InvalidArgument naming descriptors[1]: is_negative_hits", name, err)
		}
	}
	// Nothing was taken: the rider has what an untouched rider has.
	if got, want := h.peek(t, "rides", desc("rider", "x")).Statuses[0].LimitRemaining, h.peek(t, "rides", desc("rider", "untouched")).Statuses[0].LimitRemaining; got != want {
		t.Errorf("after refused refunds: %d left, want %d", got, want)
	}
}

// TestEnvoyExampleConfigs serves the configurations written like
// envoyproxy/ratelimit's documented examples (internal/config/testdata/envoy)
// and checks a few decisions of each kind end to end.
func TestEnvoyExampleConfigs(t *testing.T) {
	h := start(t, nil)
	if err := h.srv.ReloadDir("../config/testdata/envoy"); err != nil {
		t.Fatal(err)
	}
	// Nested: 3 promos a day per recipient; any message: 50 a day.
	for i, want := range []string{"OK: OK OK", "OK: OK OK", "OK: OK OK", "OVER: OVER OK"} {
		r := h.should(t, "sms", desc("kind", "promo", "recipient", "+15550100"), desc("recipient", "+15550100"))
		if got := codesOf(r); got != want {
			t.Errorf("promo %d: %s, want %s", i, got, want)
		}
	}
	if r := h.peek(t, "sms", desc("recipient", "+15550100")); r.Statuses[0].LimitRemaining != 47 {
		t.Errorf("recipient remaining %d, want 47 (the refused request took nothing)", r.Statuses[0].LimitRemaining)
	}
	// Exact value beats the default; each database value has its own state.
	if r := h.should(t, "db_ops", desc("database", "accounts"), desc("database", "orders"), desc("database", "users")); codesOf(r) != "OK: OK OK OK" ||
		r.Statuses[0].LimitRemaining != 399 || r.Statuses[1].LimitRemaining != 199 || r.Statuses[2].LimitRemaining != 199 {
		t.Errorf("db_ops: %v", r)
	}
	// A blocked address, an unlimited one, the default.
	if got := codesOf(h.should(t, "mesh", desc("logged_in", "no", "client_ip", "192.0.2.7"), desc("logged_in", "no", "client_ip", "198.51.100.9"))); got != "OVER: OVER OK" {
		t.Errorf("mesh: %s", got)
	}
	// Wildcard: each /reports/ value has its own state under the
	// wildcard's limit; the exact value and the default have theirs.
	r := h.should(t, "paths", desc("path", "/reports/weekly"), desc("path", "/reports/daily"), desc("path", "/trips"))
	if codesOf(r) != "OK: OK OK OK" || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 10 || r.Statuses[1].CurrentLimit.GetRequestsPerUnit() != 100 || r.Statuses[2].CurrentLimit.GetRequestsPerUnit() != 50 {
		t.Errorf("paths: %v", r)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
