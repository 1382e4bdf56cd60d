// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestSimulateBounded: a simulation beyond MaxSimulations running is
// answered 503 with Retry-After at once, not run beside them (sixteen at
// once made most RLS calls miss Envoy's deadline). Without the bound it ran.
func TestSimulateBounded(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	body := `{"algorithm":"gcra","limit":5,"period":"1s","pattern":"1 every 100ms for 2s"}`
	for range MaxSimulations {
		h.srv.simulating <- struct{}{} // simulations running
	}
	resp, err := http.Post(h.http.URL+"/v1/simulate", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("busy: %s, Retry-After %q: %s", resp.Status, resp.Header.Get("Retry-After"), b)
	}
	for range MaxSimulations {
		<-h.srv.simulating
	}
	if code, s := h.post(t, "/v1/simulate", body); code != http.StatusOK {
		t.Errorf("free: %d %s", code, s)
	}
}

// pipeListener hands the server the far ends of net.Pipe connections, so
// an HTTP server runs in a synctest bubble on its fake clock.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *pipeListener) dial() net.Conn {
	c, s := net.Pipe()
	l.conns <- s
	return c
}

// TestHTTPServerTimeouts: a client that never finishes its request, or
// never reads its answer, is cut off after ReadTimeout or WriteTimeout (on
// the bubble's fake clock), instead of holding its connection and buffers
// as long as it likes.
func TestHTTPServerTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No real sockets in the bubble: they would keep its clock still.
		store := memstore.New()
		defer store.Close()
		s, err := New(store, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		c0, err := config.Load(mapFS("rides.yaml", ridesYAML))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(c0); err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		srv := NewHTTPServer(s.Handler())
		go srv.Serve(l)
		defer srv.Close()

		// A body promised and never sent.
		c := l.dial()
		t0 := time.Now()
		io.WriteString(c, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
		c.SetReadDeadline(t0.Add(ReadTimeout + time.Minute)) // fail, not hang, without a timeout
		_, err = io.ReadAll(c)                               // the server's answer, then EOF when it closes
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("a stalled body: %v", err)
		}
		if d := time.Since(t0); d < ReadTimeout-ReadHeaderTimeout || d > ReadTimeout {
			t.Errorf("a stalled body was held %v; want at most ReadTimeout, %v", d, ReadTimeout)
		}
		c.Close()

		// An answer never read: the live page's script, about 10 KiB,
		// more than a pipe holds.
		c = l.dial()
		t0 = time.Now()
		io.WriteString(c, "GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReaderSize(c, 16)
		if _, err := br.Peek(1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(WriteTimeout + time.Second) // the fake clock: nothing reads
		synctest.Wait()
		c.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := io.ReadAll(br); err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("an unread answer: %v", err)
		}
		if d := time.Since(t0); d > WriteTimeout+time.Second {
			t.Errorf("an unread answer held the connection %v", d)
		}
		c.Close()
		l.Close()
	})
}

// jsonPost is a POST of body to path with a JSON content type.
func jsonPost(path, body string) *http.Request {
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// TestCrossSiteRefused: the admin API refuses what another site's page can
// make an operator's browser send: a POST whose body is not declared JSON
// (a cross-site form or fetch may send text/plain without a preflight) is
// 415, and a POST from another origin (Sec-Fetch-Site, or Origin against
// Host) is 403. Every answer carries nosniff, same-origin CORP and
// frame-ancestors 'none', and none carries a CORS grant. On main
// text/plain POSTs to /v1/check and /v1/reset answered 200.
func TestCrossSiteRefused(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	check := `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"x"}]}]}`
	reset := `{"domain":"rides","entries":[{"key":"rider","value":"x"}]}`
	for _, tc := range []struct {
		name, path, body string
		header           map[string]string
		want             int
	}{
		{"text/plain check", "/v1/check", check, map[string]string{"Content-Type": "text/plain"}, 415},
		{"text/plain reset", "/v1/reset", reset, map[string]string{"Content-Type": "text/plain"}, 415},
		{"form reset", "/v1/reset", reset, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"no type", "/v1/check", check, nil, 415},
		{"cross-site check", "/v1/check", check, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403},
		{"same-site reset", "/v1/reset", reset, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"}, 403},
		{"other origin", "/v1/check", check, map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, 403},
		{"cross-site simulate", "/v1/simulate", `{"algorithm":"gcra","limit":1,"period":"1s","pattern":"burst 2"}`, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403},
		{"same origin", "/v1/check", check, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}, 200},
		{"JSON with charset", "/v1/check", check, map[string]string{"Content-Type": "application/json; charset=utf-8"}, 200},
		{"not a browser", "/v1/reset", reset, map[string]string{"Content-Type": "application/json"}, 200},
	} {
		req, _ := http.NewRequest("POST", h.http.URL+tc.path, strings.NewReader(tc.body))
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s %s, want %d", tc.name, resp.Status, b, tc.want)
		}
	}
	for _, path := range []string{"/", "/app.js", "/v1/rules", "/metrics", "/healthz"} {
		req, _ := http.NewRequest("GET", h.http.URL+path, nil)
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		hd := resp.Header
		if hd.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(hd.Get("Content-Security-Policy"), "frame-ancestors 'none'") || hd.Get("Cross-Origin-Resource-Policy") != "same-origin" {
			t.Errorf("GET %s: headers %v", path, hd)
		}
		for k := range hd {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("GET %s: %s: %s", path, k, hd.Get(k))
			}
		}
	}
}

// stallStore answers nothing until its caller's context ends, as Redis
// while it stalls.
type stallStore struct{}

func (stallStore) Take(ctx context.Context, _ sluice.Policy, _ string, _ int64) (sluice.Decision, error) {
	<-ctx.Done()
	return sluice.Decision{}, ctx.Err()
}

func (stallStore) TakeAll(ctx context.Context, _ []sluice.Request, _ []sluice.Decision) error {
	<-ctx.Done()
	return ctx.Err()
}

func (stallStore) Reset(ctx context.Context, _ sluice.Policy, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

func (stallStore) Close() error { return nil }

// TestHTTPTimeout: an HTTP API caller's Sluice-Timeout bounds its call
// while the store stalls (fake clock); there was no way to send one, and a
// caller waited the store's whole ceiling. A bad value is 400.
func TestHTTPTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(stallStore{}, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(mapFS("d.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, failure_mode: closed}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(c); err != nil {
			t.Fatal(err)
		}
		h := s.Handler()
		for _, path := range []string{"/v1/check", "/v1/reset"} {
			body := `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`
			if path == "/v1/reset" {
				body = `{"domain":"d","entries":[{"key":"k","value":"v"}]}`
			}
			req := jsonPost(path, body)
			req.Header.Set(TimeoutHeader, "50ms")
			rec := httptest.NewRecorder()
			start := time.Now()
			done := make(chan struct{})
			go func() { h.ServeHTTP(rec, req); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Hour):
				t.Fatalf("%s with %s: 50ms: no answer in an hour", path, TimeoutHeader)
			}
			if d := time.Since(start); d > 50*time.Millisecond {
				t.Errorf("%s with %s: 50ms: answered after %v", path, TimeoutHeader, d)
			}
			if rec.Code != http.StatusGatewayTimeout {
				t.Errorf("%s with %s: 50ms against a stalled store: status %d, want 504 (the caller still listens)", path, TimeoutHeader, rec.Code)
			}
			req = jsonPost(path, body)
			req.Header.Set(TimeoutHeader, "soon")
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest {
				t.Errorf("%s with %s: soon: %d", path, TimeoutHeader, rec.Code)
			}
		}
	})
}

// TestRequestDescriptorsBounded: a request of more than MaxDescriptors
// descriptors, or with a descriptor of more than config.MaxDepth entries,
// is refused naming the field and the number given: over RLS as
// InvalidArgument, over the JSON API as 400. Over RLS the count is taken
// from the message's bytes before it is decoded: 360,000 descriptors of
// one entry (3.6 MB, under gRPC's 4 MiB limit) are refused having
// allocated little more than the message itself, where deciding them
// allocated hundreds of MiB (the heap grew by 245 MiB); over the JSON API
// decoding stops at the bound, so a 1 MiB body of empty descriptors (or of
// one descriptor's empty entries) allocates a few times its size, not 55
// times. Requests at the bounds are decided.
func TestRequestDescriptorsBounded(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	h.srv.RegisterGRPC(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// request is a RateLimitRequest of domain rides with descs descriptors
	// of one entry (city, value) and, last, one of deep entries (none when
	// deep is 0).
	request := func(descs int, value string, deep int) []byte {
		req := &rls.RateLimitRequest{Domain: "rides"}
		for range descs {
			req.Descriptors = append(req.Descriptors, desc("city", value))
		}
		if deep > 0 {
			d := &rlcommon.RateLimitDescriptor{}
			for range deep {
				d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: "city", Value: "rome"})
			}
			req.Descriptors = append(req.Descriptors, d)
		}
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ask := func(in []byte) error {
		var out []byte
		return conn.Invoke(context.Background(), rls.RateLimitService_ShouldRateLimit_FullMethodName, &in, &out)
	}
	check := func(body string) (int, string) {
		resp, err := http.Post(h.http.URL+"/v1/check", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	jsonBody := func(descs, deep int) string {
		var b strings.Builder
		b.WriteString(`{"domain":"rides","descriptors":[`)
		for i := range descs {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"entries":[{"key":"city","value":"rome"}]}`)
		}
		if deep > 0 {
			b.WriteString(`,{"entries":[{"key":"city","value":"rome"}`)
			b.WriteString(strings.Repeat(`,{"key":"city","value":"rome"}`, deep-1))
			b.WriteString(`]}`)
		}
		b.WriteString(`]}`)
		return b.String()
	}

	t.Run("rls", func(t *testing.T) {
		for _, c := range []struct {
			descs, deep int
			want        string // "" for decided
		}{
			{MaxDescriptors, 0, ""},
			{MaxDescriptors - 1, config.MaxDepth, ""},
			{MaxDescriptors + 1, 0, fmt.Sprintf("descriptors: %d given; at most %d", MaxDescriptors+1, MaxDescriptors)},
			{1, config.MaxDepth + 1, fmt.Sprintf("descriptors[1].entries: %d given; at most %d", config.MaxDepth+1, config.MaxDepth)},
		} {
			err := ask(request(c.descs, "rome", c.deep))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%d descriptors, %d entries deep: %v; want it decided", c.descs, c.deep, err)
			case c.want != "" && (status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want)):
				t.Errorf("%d descriptors, %d entries deep: %v; want InvalidArgument %q", c.descs, c.deep, err, c.want)
			}
		}

		const many = 360_000
		in := request(many, "", 0) // 10 bytes a descriptor
		if len(in) > 4<<20 {
			t.Fatalf("request of %d bytes: over gRPC's default limit", len(in))
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := ask(in)
		runtime.ReadMemStats(&after)
		if want := fmt.Sprintf("descriptors: %d given", many); status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), want) {
			t.Errorf("%d descriptors: %v; want InvalidArgument %q", many, err, want)
		}
		t.Logf("%d descriptors in %d bytes: refused, %d KiB allocated", many, len(in), (after.TotalAlloc-before.TotalAlloc)>>10)
		// The message is read once and copied once (the codec's buffer);
		// anything past a few times its size is decoding.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*uint64(len(in)) {
			t.Errorf("%d descriptors in %d bytes: the call allocated %d MiB; want at most 4 times the message (%d MiB)",
				many, len(in), alloc>>20, 4*len(in)>>20)
		}
	})

	t.Run("json", func(t *testing.T) {
		many := (maxBody - 64) / 3 // empty descriptors (or entries) in a body near maxBody
		for _, c := range []struct {
			body string
			want string // "" for decided
		}{
			{jsonBody(MaxDescriptors, 0), ""},
			{jsonBody(MaxDescriptors-1, config.MaxDepth), ""},
			{jsonBody(MaxDescriptors+1, 0), fmt.Sprintf("descriptors: %d given; at most %d", MaxDescriptors+1, MaxDescriptors)},
			{jsonBody(1, config.MaxDepth+1), fmt.Sprintf("descriptors[1].entries: %d given; at most %d", config.MaxDepth+1, config.MaxDepth)},
			{`{"domain":"rides","descriptors":[{}` + strings.Repeat(`,{}`, many-1) + `]}`,
				fmt.Sprintf("descriptors: %d given", many)},
			{`{"domain":"rides","descriptors":[{"entries":[{}` + strings.Repeat(`,{}`, many-1) + `]}]}`,
				fmt.Sprintf("descriptors[0].entries: %d given", many)},
		} {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			code, body := check(c.body)
			runtime.ReadMemStats(&after)
			body = body[:min(len(body), 200)]
			switch {
			case c.want == "" && code != http.StatusOK:
				t.Errorf("body of %d bytes: %d %s; want it decided", len(c.body), code, body)
			case c.want != "" && (code != http.StatusBadRequest || !strings.Contains(body, c.want)):
				t.Errorf("body of %d bytes: %d %s; want 400 %q", len(c.body), code, body, c.want)
			}
			// The body is read, buffered and copied a few times; decoding
			// 349,505 descriptors allocated 55 times it.
			if alloc := after.TotalAlloc - before.TotalAlloc; len(c.body) > maxBody/2 && alloc > 16*uint64(len(c.body)) {
				t.Errorf("body of %d bytes (%.40s…): %d MiB allocated; want at most 16 times the body (%d MiB)",
					len(c.body), c.body, alloc>>20, 16*len(c.body)>>20)
			}
		}
	})
}
