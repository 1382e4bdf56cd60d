// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestUndecidedIsNotQuotaExceeded: a request the limiters could not decide
// at all (a closed store) is answered 503, not 429 Quota Exceeded with
// Retry-After 0, and not counted as refused by a limit; limiters over
// different stores are refused by New (both were 429: a quota the request
// never touched, retry at once).
func TestUndecidedIsNotQuotaExceeded(t *testing.T) {
	p := func(name string) sluice.Policy {
		return sluice.Policy{Name: name, Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second}
	}
	t.Run("limiters over different stores", func(t *testing.T) {
		s1, _ := newStore(t)
		s2, _ := newStore(t)
		a := newLimiter(t, s1, p("a"))
		b := newLimiter(t, s2, p("b"))
		m, err := New(Global(Limit{Limiter: a, Key: Header("K")}, Limit{Limiter: b, Key: Header("K")}))
		if err != nil {
			return // refusing the misconfiguration at New is fine
		}
		w := send(m.Handler(okHandler), "GET", "/", "192.0.2.1:1234", "K", "x")
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("limiters over two stores: %d Retry-After %q RateLimit %q, %s; want 503 (nothing could be decided)",
				w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"), w.Body)
		}
	})
	t.Run("closed store", func(t *testing.T) {
		s, _ := newStore(t)
		a := newLimiter(t, s, p("a"))
		m := newMiddleware(t, Global(Limit{Limiter: a, Key: Header("K")}))
		s.Close()
		w := send(m.Handler(okHandler), "GET", "/", "192.0.2.1:1234", "K", "x")
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("closed store: %d Retry-After %q RateLimit %q, %s; want 503 (never admitted, but no quota was exceeded)",
				w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"), w.Body)
		}
		if st := m.Stats(); st.Refused != 0 {
			t.Errorf("closed store counted as %d refusals by a limit", st.Refused)
		}
	})
}
