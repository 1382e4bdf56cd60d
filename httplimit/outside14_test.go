// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestOutside14UndecidedIsNotQuotaExceeded: a request the limiter could
// not decide at all is not "limited". Package decide's rule (decide.go:22-24)
// says "A batch that could not be decided at all (... a misconfiguration,
// such as limiters over different stores) is Unavailable", and the root
// doc says "An error from a Limiter means the request could not be decided,
// never 'limited'". Both cases below are answered 429 Quota Exceeded with
// Retry-After: 0 and RateLimit r=0;t=0, and counted as Refused: the client
// is told it has exhausted a quota it never touched and may retry at once.
func TestOutside14UndecidedIsNotQuotaExceeded(t *testing.T) {
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
