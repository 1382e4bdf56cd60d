// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
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
