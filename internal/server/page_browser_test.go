// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

// chromiumPath finds the browser the live page's test drives: SLUICE_CHROMIUM,
// or chromium (or chromium-browser) on PATH. Missing, the test fails: `make
// chromium` (.ci/install-chromium) installs it from Debian.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("Chromium is not installed: run `make chromium` (bash .ci/install-chromium, as root) or set SLUICE_CHROMIUM to a Chromium binary")
	return ""
}

// artifactDir is where the browser test keeps its screenshots:
// $SLUICE_TEST_ARTIFACTS if set, else testdata/artifacts (ignored by git).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SLUICE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLivePageInChromium serves the built-in configuration and drives a
// real headless Chromium over the DevTools protocol: the page loads
// without console errors, lists the built-in rules, shows requests made
// after it loaded, and its panel draws a simulated burst.
func TestLivePageInChromium(t *testing.T) {
	bin := chromiumPath(t)
	arts := artifactDir(t)

	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	srv, err := New(store, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
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

	bctx, shot, problems := newBrowser(t, bin, arts)
	cell := func(rule, class string) string {
		return fmt.Sprintf(`tr[data-rule=%q] td.%s`, rule, class)
	}

	var rulesText, before, storeName, version, replicas, riderName string
	err = chromedp.Run(bctx,
		cdplog.Enable(),
		runtime.Enable(),
		chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible(cell("rider-api.rider_id", "decisions"), chromedp.ByQuery),
		chromedp.WaitVisible(`#store-state[data-state="ok"]`, chromedp.ByQuery),
		chromedp.Text("#rules", &rulesText, chromedp.ByQuery),
		chromedp.Text(cell("rider-api.rider_id", "decisions"), &before, chromedp.ByQuery),
		chromedp.Text(cell("rider-api.rider_id", "name"), &riderName, chromedp.ByQuery),
		chromedp.Text("#store-name", &storeName, chromedp.ByQuery),
		chromedp.Text("#svc-version", &version, chromedp.ByQuery),
		chromedp.Text("#replicas", &replicas, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("load the page: %v", err)
	}
	// The service: the build as sluice version names it, the store, the
	// replica count (issue 22 item 13); the rule by its one name (item 15).
	if st := srv.statusView(srv.now()); !strings.Contains(version, st.Version) || !strings.Contains(version, st.GoVersion) {
		t.Errorf("the page's version %q, want %q and %q", version, st.Version, st.GoVersion)
	}
	if storeName != "memory (memory)" || !strings.HasPrefix(replicas, "1 (fixed)") {
		t.Errorf("the page's store %q and replicas %q; want memory (memory) and 1 (fixed)", storeName, replicas)
	}
	if riderName != "rider (rider-api.rider_id)" {
		t.Errorf("the rule's name on the page: %q, want its name and its key: rider (rider-api.rider_id)", riderName)
	}
	for _, r := range c.Rules() {
		if !strings.Contains(rulesText, r.FullKey) {
			t.Errorf("the page does not list the built-in rule %s", r.FullKey)
		}
	}
	for _, want := range []string{"token-bucket 5/1s burst 10", "leaky-bucket 3000/1s burst 5000", "sliding-log 500/10s", "shadow", "fail closed", "unlimited"} {
		if !strings.Contains(rulesText, want) {
			t.Errorf("the page's rules lack %q", want)
		}
	}
	if before != "0" {
		t.Errorf("decisions before any request: %q, want 0", before)
	}

	// A request whose domain is misspelt matches no rule: the page shows
	// it (issue 22: a typo turned limiting off and left no trace).
	resp, err := http.Post(hs.URL+"/v1/check", "application/json", strings.NewReader(`{"domain":"rider-apj","descriptors":[{"entries":[{"key":"rider_id","value":"r42"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var unmatched string
	if err := chromedp.Run(bctx,
		chromedp.WaitVisible(`#unmatched tr[data-domain="(other)"]`, chromedp.ByQuery),
		chromedp.Text(`#unmatched tr[data-domain="(other)"]`, &unmatched, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("unmatched requests on the page: %v", err)
	}
	if !strings.Contains(unmatched, "rider-apj") || !strings.Contains(unmatched, "rider_id") {
		t.Errorf("the page's unmatched requests: %q, want the domain rider-apj and key rider_id", unmatched)
	}

	// Twelve requests from one rider: ten admitted, two refused.
	for range 12 {
		resp, err := http.Post(hs.URL+"/v1/check", "application/json", strings.NewReader(`{"domain":"rider-api","descriptors":[{"entries":[{"key":"rider_id","value":"r42"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var near, summary, peak string
	var refusedMarks int
	err = chromedp.Run(bctx,
		chromedp.Poll(fmt.Sprintf(`document.querySelector(%q).textContent === "12" && document.querySelector(%q).textContent === "2"`,
			cell("rider-api.rider_id", "decisions"), cell("rider-api.rider_id", "refused")), nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Text(`tr[data-rule="rider-api.rider_id"] .near`, &near, chromedp.ByQuery),
		chromedp.TextContent(`tr[data-rule="rider-api.rider_id"] svg.spark text.peak`, &peak, chromedp.ByQuery),
		shot("live-page.png"),
		chromedp.SetValue("#sim-rule", `["rider-api","rider-api.rider_id"]`, chromedp.ByQuery),
		chromedp.SetValue("#sim-pattern", "burst 12 at 0, then 1 every 100ms for 2s", chromedp.ByQuery),
		chromedp.Click("#sim-run", chromedp.ByQuery),
		chromedp.WaitVisible("#sim-result svg rect.req", chromedp.ByQuery),
		chromedp.Text("#sim-summary", &summary, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("#sim-result svg rect.req.refused").length`, &refusedMarks),
		chromedp.ScrollIntoView("#sim-result", chromedp.ByQuery),
		shot("live-page-burst.png"),
	)
	if err != nil {
		t.Fatalf("drive the page: %v", err)
	}
	if !strings.Contains(near, "rider_id=r42") {
		t.Errorf("keys nearest the limit: %q, want rider_id=r42", near)
	}
	// The sparkline's scale: its peak, per 5 s aligned to the epoch, is
	// the 12 requests (or the larger part, if they straddled two 5 s).
	v := srv.rulesView(srv.now())
	if want := strconv.FormatInt(peak5(ruleNamed(t, v, "rider-api.rider_id").Series.Decisions, v.Now), 10); peak != want || want == "0" {
		t.Errorf("the sparkline's peak label %q, want %s", peak, want)
	}
	// Token bucket 5/s, burst 10: the burst of 12 loses 2; then 1 every
	// 100 ms against a refill of one per 200 ms loses every other.
	var admitted, delayed, refused int
	if _, err := fmt.Sscanf(summary[strings.LastIndex(summary, ": ")+2:], "%d admitted, %d delayed, %d refused", &admitted, &delayed, &refused); err != nil {
		t.Fatalf("panel summary %q: %v", summary, err)
	}
	if admitted != 20 || delayed != 0 || refused != 12 || refusedMarks != refused {
		t.Errorf("panel: summary %q with %d refused marks drawn; want 20 admitted, 12 refused, and as many refused marks", summary, refusedMarks)
	}
	for _, p := range problems() {
		t.Errorf("browser reported: %s", p)
	}
}

// peak5 is the sparkline's peak: the most of per-second counts a (a[i]
// counting the second now−len(a)+1+i) in any 5 seconds aligned to a
// multiple of 5 s since the Unix epoch.
func peak5(a []int64, now int64) int64 {
	sums := map[int64]int64{}
	var peak int64
	for i, n := range a {
		sec := now - int64(len(a)) + 1 + int64(i)
		b := sec - ((sec%5)+5)%5
		sums[b] += n
		peak = max(peak, sums[b])
	}
	return peak
}

// newBrowser starts a headless Chromium for the test, with extra options
// after the usual ones: its context, a screenshot action that saves into
// arts, and the console errors, warnings and exceptions the page has
// reported so far.
func newBrowser(t *testing.T, bin, arts string, extra ...chromedp.ExecAllocatorOption) (context.Context, func(name string) chromedp.Action, func() []string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1100),
		chromedp.Flag("no-proxy-server", true),
		chromedp.UserDataDir(profileDir(t)),
	)
	opts = append(opts, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)

	var mu sync.Mutex
	var problems []string
	chromedp.ListenTarget(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeWarning || ev.Type == runtime.APITypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Error())
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError || ev.Entry.Level == cdplog.LevelWarning {
				problems = append(problems, fmt.Sprintf("log %s: %s %s", ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var buf []byte
			if err := chromedp.FullScreenshot(&buf, 100).Do(ctx); err != nil {
				return err
			}
			path := filepath.Join(arts, name)
			t.Logf("screenshot: %s", path)
			return os.WriteFile(path, buf, 0o644)
		})
	}
	return bctx, shot, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(problems)
	}
}

// profileDir returns a directory for Chromium's profile, removed when the
// test ends. Not t.TempDir: Chromium's helper processes may still write to
// the profile for a moment after the browser has exited, which made
// TempDir's single RemoveAll fail the test now and then ("directory not
// empty"); this cleanup tries again until the directory is gone (for at
// most 10 s, then it fails the test).
func profileDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sluice-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		for range 200 {
			if err = os.RemoveAll(dir); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("removing Chromium's profile: %v", err)
	})
	return dir
}
