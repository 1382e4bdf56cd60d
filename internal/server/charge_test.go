// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
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

// chargeGate is a store over a memstore whose charges (one forced request,
// as Limiter.Charge makes) of a policy go through that policy's gate
// first, which makes the store call (next) or not, and answers for it.
type chargeGate struct {
	next sluice.Store
	mu   sync.Mutex
	gate map[string]func(ctx context.Context, next func() error) error // by policy name
}

// over makes g a store over ms (startOver's wrap).
func (g *chargeGate) over(ms *memstore.Store) sluice.Store {
	g.next = ms
	return g
}

// once sends policy's next charge, and only that one, through f.
func (g *chargeGate) once(policy string, f func(ctx context.Context, next func() error) error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate == nil {
		g.gate = map[string]func(context.Context, func() error) error{}
	}
	g.gate[policy] = f
}

func (g *chargeGate) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	call := func() error { return g.next.TakeAll(ctx, reqs, out) }
	if len(reqs) != 1 || !reqs[0].Force {
		return call()
	}
	g.mu.Lock()
	f := g.gate[reqs[0].Policy.Name]
	delete(g.gate, reqs[0].Policy.Name)
	g.mu.Unlock()
	if f == nil {
		return call()
	}
	return f(ctx, call)
}

func (g *chargeGate) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	return g.next.Take(ctx, p, key, cost)
}

func (g *chargeGate) Reset(ctx context.Context, p sluice.Policy, key string) error {
	return g.next.Reset(ctx, p, key)
}

func (g *chargeGate) Close() error { return nil } // the memstore is closed by startOver

// reserveID reserves 100 on each descriptor (entries key=value) of the llm
// domain and returns the reservation's ID.
func (h *harness) reserveID(t *testing.T, kv ...string) string {
	t.Helper()
	var ds []string
	for i := 0; i+1 < len(kv); i += 2 {
		ds = append(ds, fmt.Sprintf(`{"entries":[{"key":%q,"value":%q}]}`, kv[i], kv[i+1]))
	}
	code, body := h.post(t, "/v1/reserve", `{"domain":"llm","descriptors":[`+strings.Join(ds, ",")+`],"hits_addend":100}`)
	var r ReserveResponse
	if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil || r.ReservationID == "" {
		t.Fatalf("reserve: %d %s", code, body)
	}
	return r.ReservationID
}

// commit commits reservation id with cost used, with the Sluice-Timeout
// timeout unless it is "". It does not stop the test (any goroutine may
// call it).
func (h *harness) commit(id string, used int, timeout string) (int, string, error) {
	req, err := http.NewRequest("POST", h.http.URL+"/v1/commit", strings.NewReader(fmt.Sprintf(`{"reservation_id":%q,"hits_addend":%d}`, id, used)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if timeout != "" {
		req.Header.Set(TimeoutHeader, timeout)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// left peeks at what each descriptor (key=value) of the llm domain has
// left.
func (h *harness) left(t *testing.T, kv ...string) []int64 {
	t.Helper()
	var out []int64
	for i := 0; i+1 < len(kv); i += 2 {
		code, body := h.post(t, "/v1/check", fmt.Sprintf(`{"domain":"llm","descriptors":[{"entries":[{"key":%q,"value":%q}]}],"hits_addend":0}`, kv[i], kv[i+1]))
		var r CheckResponse
		if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil || len(r.Statuses) != 1 {
			t.Fatalf("peek: %d %s", code, body)
		}
		out = append(out, r.Statuses[0].Remaining)
	}
	return out
}

// mustCommit is commit that stops the test on a transport error.
func (h *harness) mustCommit(t *testing.T, id string, used int, timeout string) (int, string) {
	t.Helper()
	code, body, err := h.commit(id, used, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// TestCommitTimeoutLeavesReservationOpen: a commit whose Sluice-Timeout
// passes before the store answers (the store never answers it) is 504 and
// charges nothing; the reservation stays open, and the retry charges what
// exceeded the estimate, once. The reservation was taken before the
// charge: the retry was 404, and the 800 tokens over the estimate were
// never charged.
func TestCommitTimeoutLeavesReservationOpen(t *testing.T) {
	g := &chargeGate{}
	h := startOver(t, g.over, map[string]string{"llm.yaml": tokensYAML})
	id := h.reserveID(t, "plain", "acme")
	g.once("llm.plain", func(ctx context.Context, _ func() error) error {
		<-ctx.Done() // the store does not answer
		return ctx.Err()
	})
	if code, body := h.mustCommit(t, id, 900, "20ms"); code != http.StatusGatewayTimeout || !strings.Contains(body, "the reservation stays open") {
		t.Fatalf("commit, store stalled past the Sluice-Timeout: %d %s, want 504 saying the reservation stays open", code, body)
	}
	if left := h.left(t, "plain", "acme"); left[0] != 900 {
		t.Errorf("after the 504: %d left, want 900 (the estimate only)", left[0])
	}
	code, body := h.mustCommit(t, id, 900, "")
	var c CheckResponse
	if err := json.Unmarshal([]byte(body), &c); code != 200 || err != nil || c.Statuses[0].Remaining != 100 {
		t.Fatalf("the retry: %d %s, want 200 with 100 left (1000-900)", code, body)
	}
	if code, body := h.mustCommit(t, id, 900, ""); code != http.StatusNotFound {
		t.Errorf("a commit after the settling retry: %d %s, want 404", code, body)
	}
	if left := h.left(t, "plain", "acme"); left[0] != 100 {
		t.Errorf("at the end: %d left, want 100 (900 charged once)", left[0])
	}
}

// TestCommitRecordedAtDeadlineChargedOnce: a charge the store records
// whose answer comes after the commit's Sluice-Timeout has passed is 504,
// and known to be recorded: the retry does not charge it again.
func TestCommitRecordedAtDeadlineChargedOnce(t *testing.T) {
	g := &chargeGate{}
	h := startOver(t, g.over, map[string]string{"llm.yaml": tokensYAML})
	id := h.reserveID(t, "plain", "acme")
	g.once("llm.plain", func(ctx context.Context, next func() error) error {
		err := next() // recorded...
		<-ctx.Done()  // ...and answered once the deadline has passed
		return err
	})
	if code, body := h.mustCommit(t, id, 900, "20ms"); code != http.StatusGatewayTimeout {
		t.Fatalf("commit answered after its Sluice-Timeout: %d %s, want 504", code, body)
	}
	if code, body := h.mustCommit(t, id, 900, ""); code != 200 {
		t.Fatalf("the retry: %d %s, want 200", code, body)
	}
	if left := h.left(t, "plain", "acme"); left[0] != 100 {
		t.Errorf("%d left, want 100 (900 charged once)", left[0])
	}
}

// TestCommitStoreFailureLeavesReservationOpen: a commit of two descriptors
// whose second charge the store fails is 502, naming it, and leaves the
// reservation open; the first descriptor's charge is recorded, so the
// retry (which must carry the same cost: another is 409 and charges
// nothing) charges only the second. It answered 200, with store_error on
// the second, and the reservation was gone: its charge was lost.
func TestCommitStoreFailureLeavesReservationOpen(t *testing.T) {
	g := &chargeGate{}
	h := startOver(t, g.over, map[string]string{"llm.yaml": tokensYAML})
	id := h.reserveID(t, "plain", "acme", "tenant", "acme")
	g.once("llm.tenant", func(context.Context, func() error) error { return errDead })
	code, body := h.mustCommit(t, id, 900, "")
	if code != http.StatusBadGateway || !strings.Contains(body, "descriptors [1]: ") || !strings.Contains(body, errDead.Error()) || !strings.Contains(body, "retry the commit with hits_addend 900") {
		t.Fatalf("commit, the store failing the second charge: %d %s, want 502 naming descriptor 1", code, body)
	}
	if left := h.left(t, "plain", "acme", "tenant", "acme"); left[0] != 100 || left[1] != 900 {
		t.Errorf("after the 502: %v left, want [100 900] (the first charged, the second not)", left)
	}
	if code, body := h.mustCommit(t, id, 950, ""); code != http.StatusConflict || !strings.Contains(body, "partly charged for hits_addend 900") {
		t.Errorf("a retry with another cost: %d %s, want 409", code, body)
	}
	code, body = h.mustCommit(t, id, 900, "")
	var c CheckResponse
	if err := json.Unmarshal([]byte(body), &c); code != 200 || err != nil || len(c.Statuses) != 2 || c.Statuses[0].Remaining != 100 || c.Statuses[1].Remaining != 100 {
		t.Fatalf("the retry: %d %s, want 200 with 100 left on each", code, body)
	}
	if left := h.left(t, "plain", "acme", "tenant", "acme"); left[0] != 100 || left[1] != 100 {
		t.Errorf("at the end: %v left, want [100 100] (each charged 800 once)", left)
	}
	if code, body := h.mustCommit(t, id, 900, ""); code != http.StatusNotFound {
		t.Errorf("a commit after the settling retry: %d %s, want 404", code, body)
	}
}

// TestCommitConcurrent: a commit of a reservation while another is under
// way is 409 and charges nothing; the first settles it (200), and later
// commits are 404. Commits of one reservation racing each other settle it
// exactly once.
func TestCommitConcurrent(t *testing.T) {
	g := &chargeGate{}
	h := startOver(t, g.over, map[string]string{"llm.yaml": tokensYAML})
	id := h.reserveID(t, "plain", "acme")
	entered, release := make(chan struct{}), make(chan struct{})
	g.once("llm.plain", func(_ context.Context, next func() error) error {
		close(entered)
		<-release
		return next()
	})
	type answer struct {
		code int
		body string
		err  error
	}
	first := make(chan answer, 1)
	go func() {
		code, body, err := h.commit(id, 900, "")
		first <- answer{code, body, err}
	}()
	<-entered // the first commit is in the store
	if code, body := h.mustCommit(t, id, 900, ""); code != http.StatusConflict || !strings.Contains(body, "another commit of it is under way") {
		t.Errorf("a commit while another is under way: %d %s, want 409", code, body)
	}
	close(release)
	if a := <-first; a.err != nil || a.code != 200 {
		t.Fatalf("the first commit: %d %s %v, want 200", a.code, a.body, a.err)
	}
	if code, body := h.mustCommit(t, id, 900, ""); code != http.StatusNotFound {
		t.Errorf("a commit after: %d %s, want 404", code, body)
	}
	if left := h.left(t, "plain", "acme"); left[0] != 100 {
		t.Errorf("%d left, want 100 (900 charged once)", left[0])
	}

	// Racing commits, no gate: one settles, the others are 409 or 404.
	id = h.reserveID(t, "plain", "beta")
	const n = 8
	answers := make(chan answer, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			code, body, err := h.commit(id, 900, "")
			answers <- answer{code, body, err}
		})
	}
	wg.Wait()
	close(answers)
	settled := 0
	for a := range answers {
		switch {
		case a.err != nil:
			t.Fatal(a.err)
		case a.code == 200:
			settled++
		case a.code != http.StatusConflict && a.code != http.StatusNotFound:
			t.Errorf("a racing commit: %d %s, want 200, 409 or 404", a.code, a.body)
		}
	}
	if settled != 1 {
		t.Errorf("%d of %d racing commits settled, want 1", settled, n)
	}
	if left := h.left(t, "plain", "beta"); left[0] != 100 {
		t.Errorf("after the racing commits: %d left, want 100 (900 charged once)", left[0])
	}
}
