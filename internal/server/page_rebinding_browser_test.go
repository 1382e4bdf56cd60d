// SPDX-License-Identifier: Apache-2.0

package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

// TestDNSRebindingInChromium: a real Chromium whose resolver maps
// evil.example (the attacker's name, rebound) and sluice.test (a name the
// operator allowed) to the server's loopback address. A script on
// evil.example:PORT, which the browser holds same-origin with the API, is
// refused its reset and its read of the rules (Chromium sends them with
// Sec-Fetch-Site: same-origin, and the Origin matches); under sluice.test
// the live page loads and the same script's requests are answered. On main
// the rebound reset and read answered 200.
func TestDNSRebindingInChromium(t *testing.T) {
	bin := chromiumPath(t)
	arts := artifactDir(t)

	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	srv, err := New(store, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithAllowedHosts("sluice.test"))
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
	// The origin http://evil.example:PORT first served the attacker's page
	// (from the attacker's server, before the rebinding): here, one path
	// of the test's listener. Every other request reaches the API.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /attack.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<!doctype html><title>a page</title>")
	})
	mux.Handle("/", srv.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	u, err := url.Parse(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()

	bctx, _, _ := newBrowser(t, bin, arts,
		chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1, MAP sluice.test 127.0.0.1"),
		chromedp.Flag("disable-features", "HttpsUpgrades,HttpsFirstBalancedModeAutoEnable"),
	)
	// What a rebinding page's script does once its name points here: a
	// same-origin reset, then a read of the rules.
	const attack = `(async () => {
		const reset = await fetch('/v1/reset', {method: 'POST', headers: {'Content-Type': 'application/json'},
			body: JSON.stringify({domain: 'rider-api', descriptors: [{entries: [{key: 'rider_id', value: 'r-1'}]}]})});
		const rules = await fetch('/v1/rules');
		return [reset.status, rules.status, await reset.text()];
	})()`
	awaitPromise := func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

	var evil []any
	if err := chromedp.Run(bctx,
		chromedp.Navigate("http://evil.example:"+port+"/attack.html"),
		chromedp.Evaluate(attack, &evil, awaitPromise),
	); err != nil {
		t.Fatalf("the rebound page: %v", err)
	}
	if len(evil) != 3 || evil[0] != float64(403) || evil[1] != float64(403) {
		t.Fatalf("under evil.example: reset, rules answered %v; want 403, 403", evil)
	}

	var allowed []any
	if err := chromedp.Run(bctx,
		chromedp.Navigate("http://sluice.test:"+port+"/"),
		chromedp.WaitVisible(`tr[data-rule="rider-api.rider_id"] td.decisions`, chromedp.ByQuery),
		chromedp.Navigate("http://sluice.test:"+port+"/attack.html"),
		chromedp.Evaluate(attack, &allowed, awaitPromise),
	); err != nil {
		t.Fatalf("the page under an allowed name: %v", err)
	}
	if len(allowed) != 3 || allowed[0] != float64(200) || allowed[1] != float64(200) {
		t.Fatalf("under sluice.test (allowed): reset, rules answered %v; want 200, 200", allowed)
	}
}
