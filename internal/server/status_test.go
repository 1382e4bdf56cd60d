// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestStatusView (issue 22 item 13): GET /v1/status names the build as
// `sluice version` does, counts the uptime on the server's clock, and shows
// the store's failures: "failing" while a decision failed in the last
// StoreFailingFor, with the count of the last minute, the last error and
// a per-second series; "ok" once they are past. The replica count is the
// one fail-local rules divide by.
func TestStatusView(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	srv, err := New(deadStore{}, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithFallback(nil, sluice.FixedReplicas(3)), WithStoreName("dead://db"))
	if err != nil {
		t.Fatal(err)
	}
	srv.now, srv.started = clock.Now, clock.Now()
	c, err := config.Load(mapFS("f.yaml", `domain: d
descriptors:
  - key: local
    rate_limit: {unit: hour, requests_per_unit: 30}
  - key: open
    rate_limit: {unit: hour, requests_per_unit: 30, failure_mode: open}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(c); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	status := func() StatusResponse {
		t.Helper()
		resp, err := hs.Client().Get(hs.URL + "/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st StatusResponse
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /v1/status: %d %v", resp.StatusCode, err)
		}
		return st
	}
	check := func() {
		t.Helper()
		resp, err := hs.Client().Post(hs.URL+"/v1/check", "application/json", strings.NewReader(`{"domain":"d","descriptors":[{"entries":[{"key":"local","value":"a"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	st := status()
	if st.Version == "" || !strings.HasPrefix(st.GoVersion, "go") || st.UptimeSeconds != 0 {
		t.Errorf("at start: version %q, go %q, uptime %v; want a version, a Go version and 0", st.Version, st.GoVersion, st.UptimeSeconds)
	}
	if s := st.Store; s.Kind != "other" || s.Name != "dead://db" || s.State != StoreOK || s.Failures != 0 || s.Redis != nil || s.LastErrorAt != nil {
		t.Errorf("before any decision: store %+v; want kind other, name dead://db, ok, no failures", s)
	}
	if r := st.Replicas; r.Count != 3 || r.CountedBy != "fixed" || r.FailLocalRules != 1 {
		t.Errorf("replicas %+v; want 3, fixed, 1 fail-local rule", r)
	}

	clock.Advance(90 * time.Second)
	for range 4 {
		check()
	}
	clock.Advance(time.Second)
	check()
	st = status()
	if st.UptimeSeconds != 91 {
		t.Errorf("uptime %v s, want 91", st.UptimeSeconds)
	}
	s := st.Store
	if s.State != StoreFailing || s.Failures != 5 || s.FailuresLastMinute != 5 || !strings.Contains(s.LastError, errDead.Error()) || s.LastErrorAt == nil || !s.LastErrorAt.Equal(t0.Add(91*time.Second)) {
		t.Errorf("after 5 failed decisions: %+v; want failing, 5 failures in the last minute, the error and its time", s)
	}
	if n := len(s.FailureSeries); n != HistorySeconds || s.FailureSeries[n-1] != 1 || s.FailureSeries[n-2] != 4 {
		t.Errorf("failure series ends %v, want ... 4 1", s.FailureSeries[max(0, n-3):])
	}

	clock.Advance(StoreFailingFor)
	if s := status().Store; s.State != StoreOK || s.FailuresLastMinute != 5 {
		t.Errorf("%v after the last failure: %s, %d in the last minute; want ok, 5", StoreFailingFor, s.State, s.FailuresLastMinute)
	}
	clock.Advance(time.Minute)
	if s := status().Store; s.FailuresLastMinute != 0 || s.Failures != 5 {
		t.Errorf("a minute later: %d in the last minute, %d in all; want 0 and 5", s.FailuresLastMinute, s.Failures)
	}
}

// TestStatusShowsEveryRedisCounter: every count of redisstore.Stats (each a
// sluice_redis_<name>_total metric) is in GET /v1/status's redis object
// under that name, with its value, in the OpenAPI document's schema of it,
// and in the live page's Redis counters. sluice_redis_heartbeat_timeouts_total
// (Stats.HeartbeatTimeouts) was in none of them.
func TestStatusShowsEveryRedisCounter(t *testing.T) {
	var stats redisstore.Stats
	sv := reflect.ValueOf(&stats).Elem()
	var counts []string // the field names of the counts
	for i := range sv.NumField() {
		if f := sv.Type().Field(i); f.Type.Kind() == reflect.Uint64 {
			sv.Field(i).SetUint(uint64(100 + i))
			counts = append(counts, f.Name)
		}
	}
	b, err := json.Marshal(redisStatus(stats))
	if err != nil {
		t.Fatal(err)
	}
	var shown map[string]any
	if err := json.Unmarshal(b, &shown); err != nil {
		t.Fatal(err)
	}
	schema := loadOpenAPI(t).Components.Schemas["StoreStatus"].Value.Properties["redis"].Value
	js, err := fs.ReadFile(page, "page/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range counts {
		name := snakeCase(field)
		if want := float64(sv.FieldByName(field).Uint()); shown[name] != want {
			t.Errorf("GET /v1/status: redis.%s = %v, want Stats.%s's %v (%s)", name, shown[name], field, want, b)
		}
		if schema.Properties[name] == nil || !slices.Contains(schema.Required, name) {
			t.Errorf("the OpenAPI document's StoreStatus.redis does not list (and require) %s", name)
		}
		if !strings.Contains(string(js), `["`+name+`", "`) {
			t.Errorf("the live page's Redis counters (page/app.js) do not show %s", name)
		}
	}
}

// snakeCase is a Go field name as the JSON API writes it: CallerTimeouts,
// caller_timeouts.
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
