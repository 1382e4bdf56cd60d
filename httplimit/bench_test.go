// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/memstore"
)

// discard is a ResponseWriter that keeps one header map, cleared between
// requests, so the benchmark measures the middleware rather than a
// recorder.
type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }

// BenchmarkMiddleware measures a request through the middleware against
// the bare handler: handler=limited is one per-IP limit, handler=limited3
// three limits (per IP, per API key, per organisation) in one batch,
// handler=leaky one per-IP leaky-bucket queue (whose default maximum delay
// is shorter than the queue: it is decided under a burst of its own), all
// on a memstore and always admitted (the queues empty, no request held),
// over 1024 client addresses, with routes matched by pattern.
func BenchmarkMiddleware(b *testing.B) {
	store := memstore.New()
	defer store.Close()
	policy := func(name string) *sluice.Limiter {
		l, err := sluice.NewLimiter(store, sluice.Policy{Name: name, Algorithm: sluice.GCRA, Limit: 1 << 40, Period: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	ip, _ := clientip.New()
	org := func(r *http.Request) (string, bool) { return "acme", true }
	one := newMiddleware(b,
		Route("GET /items/{id}", 1, Limit{Limiter: policy("per-ip"), Key: ip.Key}),
		Route("POST /items", 5, Limit{Limiter: policy("per-ip"), Key: ip.Key}),
	)
	three := newMiddleware(b,
		Route("GET /items/{id}", 1,
			Limit{Limiter: policy("per-ip"), Key: ip.Key},
			Limit{Limiter: policy("per-key"), Key: Header("X-API-Key")},
			Limit{Limiter: policy("per-org"), Key: org}),
		Route("POST /items", 5, Limit{Limiter: policy("per-ip"), Key: ip.Key}),
	)
	queue, err := sluice.NewLimiter(store, sluice.Policy{Name: "queue", Algorithm: sluice.LeakyBucket, Limit: 1 << 30, Period: time.Second, Burst: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	leaky := newMiddleware(b,
		Route("GET /items/{id}", 1, Limit{Limiter: queue, Key: ip.Key}),
	)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", app},
		{"limited", one.Handler(app)},
		{"limited3", three.Handler(app)},
		{"leaky", leaky.Handler(app)},
	} {
		b.Run("handler="+c.name, func(b *testing.B) {
			var next atomic.Uint32
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				n := next.Add(1)
				reqs := make([]*http.Request, 1024)
				for i := range reqs {
					r, _ := http.NewRequest("GET", "/items/42", nil)
					r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:5000", n, i>>8, i&255)
					r.Header.Set("X-API-Key", fmt.Sprintf("key-%d", i%64))
					reqs[i] = r
				}
				w := &discard{h: http.Header{}}
				i := 0
				for pb.Next() {
					clear(w.h)
					c.h.ServeHTTP(w, reqs[i&1023])
					if w.code != 200 {
						b.Fatalf("status %d", w.code)
					}
					i++
				}
			})
		})
	}
}
