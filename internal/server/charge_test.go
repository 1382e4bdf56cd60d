// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const tokensYAML = `domain: llm
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 1000, count_refused: true}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 1000}
`

// hits returns desc(kv...) with its hits_addend set to n, as Envoy sends
// it for a check (0) and for a debit on stream done (the token count).
func hits(n uint64, kv ...string) *rlcommon.RateLimitDescriptor {
	d := desc(kv...)
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// TestCheckThenDebit is Envoy's token-budget pattern over real gRPC: each
// request is checked with hits_addend 0 and, when admitted, debited with
// its 300 tokens on stream done. With count_refused the debit that goes
// over the 1000-a-minute budget counts, so exactly 4 checks pass (as with
// envoyproxy/ratelimit) and the next check answers OVER_LIMIT until the
// window ends. Without count_refused the debit that does not fit is
// refused and counts nothing, and every check passes.
func TestCheckThenDebit(t *testing.T) {
	h := start(t, map[string]string{"llm.yaml": tokensYAML})
	run := func(key string) (passed int, lastDebit *rls.RateLimitResponse) {
		for range 10 {
			if r := h.should(t, "llm", hits(0, key, "acme")); r.GetOverallCode() != rls.RateLimitResponse_OK {
				break
			}
			passed++
			lastDebit = h.should(t, "llm", hits(300, key, "acme"))
		}
		return passed, lastDebit
	}
	passed, debit := run("tenant")
	if passed != 4 {
		t.Fatalf("count_refused: %d checks passed, want 4", passed)
	}
	if debit.GetOverallCode() != rls.RateLimitResponse_OVER_LIMIT || debit.Statuses[0].GetLimitRemaining() != 0 {
		t.Errorf("the debit that went over: %v", debit)
	}
	// Still over 59 s later; the next window admits again.
	h.clock.Advance(59 * time.Second)
	if r := h.should(t, "llm", hits(0, "tenant", "acme")); r.GetOverallCode() != rls.RateLimitResponse_OVER_LIMIT {
		t.Errorf("in debt, the same window: %v", r.GetOverallCode())
	}
	h.clock.Advance(time.Second)
	if r := h.should(t, "llm", hits(0, "tenant", "acme")); r.GetOverallCode() != rls.RateLimitResponse_OK {
		t.Errorf("the next window: %v", r.GetOverallCode())
	}
	// Without count_refused the refused debits count nothing: the budget
	// never closes (why the option exists).
	if passed, _ := run("plain"); passed != 10 {
		t.Errorf("without count_refused: %d checks passed, want all 10", passed)
	}
	// A request refused by another descriptor still counts on a
	// count_refused one (envoyproxy/ratelimit counts every hit).
	h.clock.Advance(time.Minute)
	r, err := h.client.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "llm", Descriptors: []*rlcommon.RateLimitDescriptor{
		hits(100, "tenant", "acme"), hits(1001, "plain", "acme"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := codesOf(r); got != "OVER: OK OVER" || r.Statuses[0].GetLimitRemaining() != 900 {
		t.Errorf("refused by the other descriptor: %s %v", got, r.Statuses)
	}
}

// TestReserveCommitHTTP: the JSON API's token budget. Each request reserves
// an estimate of 100 and commits what it used; the commit that goes over
// the 1000-a-minute budget is recorded, and the next reservation is
// refused until the window ends. A reservation settles once; an expired
// one is gone (its estimate stays spent).
func TestReserveCommitHTTP(t *testing.T) {
	h := start(t, map[string]string{"llm.yaml": tokensYAML})
	reserve := func() ReserveResponse {
		t.Helper()
		code, body := h.post(t, "/v1/reserve", `{"domain":"llm","descriptors":[{"entries":[{"key":"plain","value":"acme"}]}],"hits_addend":100}`)
		var r ReserveResponse
		if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil {
			t.Fatalf("reserve: %d %s", code, body)
		}
		return r
	}
	commit := func(id string, used int) (int, CheckResponse) {
		t.Helper()
		code, body := h.post(t, "/v1/commit", fmt.Sprintf(`{"reservation_id":%q,"hits_addend":%d}`, id, used))
		var r CheckResponse
		json.Unmarshal([]byte(body), &r)
		return code, r
	}
	passed := 0
	for range 10 {
		r := reserve()
		if !r.Allowed {
			if r.ReservationID != "" || r.Statuses[0].RetryAfter <= 0 {
				t.Fatalf("a refused reservation: %+v", r)
			}
			break
		}
		passed++
		code, c := commit(r.ReservationID, 300)
		if code != 200 || c.Statuses[0].Remaining != max(0, 1000-300*int64(passed)) {
			t.Fatalf("commit %d: %d %+v", passed, code, c)
		}
		if code, _ := commit(r.ReservationID, 300); code != 404 {
			t.Fatalf("a second commit: %d, want 404", code)
		}
	}
	if passed != 4 {
		t.Fatalf("%d reservations passed, want 4", passed)
	}
	h.clock.Advance(time.Minute)
	r := reserve()
	if !r.Allowed {
		t.Fatalf("the next window: %+v", r)
	}
	h.clock.Advance(ReservationTTL)
	if code, _ := commit(r.ReservationID, 300); code != 404 {
		t.Fatalf("an expired reservation: %d, want 404", code)
	}
	// A charge is recorded past the limit, and says so.
	code, body := h.post(t, "/v1/charge", `{"domain":"llm","descriptors":[{"entries":[{"key":"plain","value":"acme"}]}],"hits_addend":5000}`)
	var c CheckResponse
	if err := json.Unmarshal([]byte(body), &c); code != 200 || err != nil || c.Allowed || c.OverallCode != "OVER_LIMIT" || c.Statuses[0].RetryAfter != 60 {
		t.Fatalf("charge 5000: %d %s", code, body)
	}
}
