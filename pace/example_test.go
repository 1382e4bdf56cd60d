// SPDX-License-Identifier: Apache-2.0

package pace_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/pace"
)

// A client of a server that allows 3 requests per second spends them, and
// then knows that a fourth request with 100ms to live cannot be admitted in
// time: it fails at once, without being sent.
func ExampleNew() {
	store := memstore.New()
	defer store.Close()
	lim, _ := sluice.NewLimiter(store, sluice.Policy{Name: "api", Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Second})
	m, _ := httplimit.New(httplimit.Global(httplimit.Limit{
		Limiter: lim,
		Key:     func(*http.Request) (string, bool) { return "everyone", true },
	}))
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()

	client := &http.Client{Transport: pace.New(nil)}
	for range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	_, err := client.Do(req)
	fmt.Println(errors.Is(err, pace.ErrDeadline))
	// Output:
	// 200 "api";r=2;t=1
	// 200 "api";r=1;t=1
	// 200 "api";r=0;t=1
	// true
}
