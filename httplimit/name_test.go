// SPDX-License-Identifier: Apache-2.0

package httplimit_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
)

// TestLimitName: Limit.Name names the limit in the headers in place of its
// policy's Name (sluice serve's gateway names a rule by its title, while
// the store keeps its state under the rule's full key); a name that is not
// printable ASCII is refused.
func TestLimitName(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	l, err := sluice.NewLimiter(store, sluice.Policy{Name: "gateway.path", Algorithm: sluice.TokenBucket, Limit: 2, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	key := func(*http.Request) (string, bool) { return "k", true }
	m, err := httplimit.New(httplimit.Global(httplimit.Limit{Limiter: l, Key: key, Name: "per-path"}))
	if err != nil {
		t.Fatal(err)
	}
	w := get(m.Handler(http.NotFoundHandler()), "/", "192.0.2.1:1")
	if p, s := w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"); !strings.HasPrefix(p, `"per-path";`) || !strings.HasPrefix(s, `"per-path";`) {
		t.Errorf("RateLimit-Policy %q, RateLimit %q; want both to name per-path", p, s)
	}
	if _, err := httplimit.New(httplimit.Global(httplimit.Limit{Limiter: l, Key: key, Name: "per\npath"})); err == nil {
		t.Error("a name with a newline was accepted")
	}
}
