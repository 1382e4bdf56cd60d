// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestLivePageRedisOutageInChromium (issue 22 item 13, issue 21): the
// built-in configuration on a real Redis, the live page in a real headless
// Chromium. The page names the store and shows it healthy, with Redis's
// counters; an Envoy's RLQS stream shows in the rule's division with its
// assignment; then Redis is killed mid-test, requests keep coming, and the
// page shows the store failing: the state, the breaker open, errors and
// failed decisions rising, the last error. No sleeps: the DOM is polled
// with bounded waits.
func TestLivePageRedisOutageInChromium(t *testing.T) {
	bin := chromiumPath(t)
	arts := artifactDir(t)

	redis := sluicetest.StartRedisServer(t)
	store, err := redisstore.Open("redis://" + redis.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	srv, err := New(store, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithStoreName("redis://"+redis.Addr))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(c); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.RegisterGRPC(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)

	check := func(rider string) {
		t.Helper()
		resp, err := http.Post(hs.URL+"/v1/check", "application/json", strings.NewReader(`{"domain":"rider-api","descriptors":[{"entries":[{"key":"rider_id","value":"`+rider+`"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/v1/check: %s", resp.Status)
		}
	}
	counter := func(name string) string { return fmt.Sprintf(`#service td[data-counter=%q]`, name) }
	num := func(s string) int64 {
		t.Helper()
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			t.Fatalf("a counter on the page: %q", s)
		}
		return n
	}

	// Healthy: three decisions through Redis.
	for range 3 {
		check("r1")
	}
	bctx, shot, problems := newBrowser(t, bin, arts)
	var storeName, breaker, calls, errorsBefore string
	var counters []string
	err = chromedp.Run(bctx,
		cdplog.Enable(),
		runtime.Enable(),
		chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible(`#store-state[data-state="ok"]`, chromedp.ByQuery),
		chromedp.Text("#store-name", &storeName, chromedp.ByQuery),
		chromedp.Text("#redis-breaker", &breaker, chromedp.ByQuery),
		chromedp.Text(counter("calls"), &calls, chromedp.ByQuery),
		chromedp.Text(counter("errors"), &errorsBefore, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#service td[data-counter]")].map(e => e.dataset.counter)`, &counters),
	)
	if err != nil {
		t.Fatalf("load the page: %v", err)
	}
	// Every count of GET /v1/status's redis object is on the page.
	b, _ := json.Marshal(redisStatus(store.Stats()))
	var shown map[string]any
	json.Unmarshal(b, &shown)
	delete(shown, "breaker_open")
	if want := slices.Sorted(maps.Keys(shown)); !slices.Equal(slices.Sorted(slices.Values(counters)), want) {
		t.Errorf("the Redis counters on the page: %v; want %v", counters, want)
	}
	if storeName != "redis://"+redis.Addr+" (redis)" || breaker != "closed" || num(calls) < 3 || num(errorsBefore) != 0 {
		t.Errorf("healthy Redis on the page: store %q, breaker %q, calls %s, errors %s; want redis://%s (redis), closed, at least 3 calls, 0 errors",
			storeName, breaker, calls, errorsBefore, redis.Addr)
	}

	// An Envoy reports a bucket of rider-api.rider_id over RLQS: the page
	// shows the rule's division, the stream assigned the whole limit. The
	// bucket's value is markup, which the page shows as text.
	const rider = `r1<img src=x onerror="document.title='pwned'">`
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	sctx, cancelStream := context.WithCancel(context.Background())
	defer cancelStream()
	stream, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "rider-api", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		{BucketId: &rlqspb.BucketId{Bucket: map[string]string{"rider_id": rider}}, NumRequestsAllowed: 3},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	division := fmt.Sprintf(`#rlqs tr[data-rule="rider-api.rider_id"][data-bucket=%q]`, "rider_id="+rider)
	var divText, title string
	var imgs int
	err = chromedp.Run(bctx,
		chromedp.WaitVisible(division+" li[data-stream]", chromedp.ByQuery),
		chromedp.Text(division, &divText, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("img").length`, &imgs),
		chromedp.Title(&title),
		chromedp.ScrollIntoView("#rlqs", chromedp.ByQuery),
		shot("live-page-redis.png"),
	)
	if err != nil {
		t.Fatalf("the RLQS division on the page: %v", err)
	}
	if imgs != 0 || title == "pwned" {
		t.Errorf("the bucket's markup made %d img elements (title %q): the page must show it as text", imgs, title)
	}
	for _, want := range []string{"rider", "rider_id=" + rider, "5/1s", "assigned 5/1s"} {
		if !strings.Contains(divText, want) {
			t.Errorf("the RLQS division on the page: %q, want %q in it", divText, want)
		}
	}

	// Redis dies. Requests keep coming: each fails (the rule fails local
	// and answers), and after five the breaker opens.
	redis.Kill()
	const during = 20
	for range during {
		check("r2")
	}
	var state, failures, errorsAfter, lastError string
	err = chromedp.Run(bctx,
		chromedp.WaitVisible(`#store-state[data-state="breaker_open"]`, chromedp.ByQuery),
		chromedp.Poll(fmt.Sprintf(`document.querySelector("#store-failures").textContent.startsWith("%d in the last minute")`, during), nil,
			chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Text("#store-state", &state, chromedp.ByQuery),
		chromedp.Text("#redis-breaker", &breaker, chromedp.ByQuery),
		chromedp.Text("#store-failures", &failures, chromedp.ByQuery),
		chromedp.Text(counter("errors"), &errorsAfter, chromedp.ByQuery),
		chromedp.Text("#store-last-error", &lastError, chromedp.ByQuery),
		chromedp.ScrollIntoView("#service", chromedp.ByQuery),
		shot("live-page-redis-down.png"),
	)
	if err != nil {
		t.Fatalf("the outage on the page: %v", err)
	}
	if !strings.Contains(state, "FAILING") || !strings.HasPrefix(breaker, "open") || num(errorsAfter) <= num(errorsBefore) || lastError == "" {
		t.Errorf("Redis down on the page: state %q, breaker %q, errors %s (before %s), last error %q; want FAILING, open, errors risen, an error",
			state, breaker, errorsAfter, errorsBefore, lastError)
	}
	if want := fmt.Sprintf("%d in the last minute, %d since start", during, during); failures != want {
		t.Errorf("failed decisions on the page: %q, want %q", failures, want)
	}
	for _, p := range problems() {
		t.Errorf("browser reported: %s", p)
	}
}
