// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/server"
	"github.com/sluicehq/sluice/redisstore"
)

// syncBuffer is a bytes.Buffer safe for the server's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type running struct {
	httpAddr, grpcAddr string
	gatewayAddr        string
	stopping           chan struct{}
	cancel             context.CancelFunc
	done               chan int
	stderr             *syncBuffer
}

// startServe runs serve in process on loopback ports chosen by the system.
func startServe(t *testing.T, o serveOptions) *running {
	t.Helper()
	r := &running{stopping: make(chan struct{}), done: make(chan int, 1), stderr: &syncBuffer{}}
	o.httpAddr, o.grpcAddr, o.gatewayAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	o.onGateway = func(a string) { r.gatewayAddr = a }
	if o.storeURL == "" {
		o.storeURL = "memory"
	}
	if o.shutdownTimeout == 0 {
		o.shutdownTimeout = 30 * time.Second
	}
	if o.reloadDebounce == 0 {
		o.reloadDebounce = server.DefaultReloadDebounce
	}
	listening := make(chan struct{})
	o.onListening = func(h, g string) { r.httpAddr, r.grpcAddr = h, g; close(listening) }
	o.onStopping = func() { close(r.stopping) }
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	var stdout bytes.Buffer
	go func() { r.done <- serve(ctx, env{stdout: &stdout, stderr: r.stderr}, o) }()
	select {
	case <-listening:
	case code := <-r.done:
		t.Fatalf("serve exited with %d: %s", code, r.stderr)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	return r
}

// stop stops serve as SIGTERM would, and fails t unless it exits 0.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if code := <-r.done; code != exitOK {
		t.Fatalf("exit %d", code)
	}
	r.done <- exitOK // for startServe's cleanup
}

func rlsClient(t testing.TB, addr string) (rls.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rls.NewRateLimitServiceClient(conn), conn
}

func rlsRequest(domain string, kv ...string) *rls.RateLimitRequest {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return &rls.RateLimitRequest{Domain: domain, Descriptors: []*rlcommon.RateLimitDescriptor{d}}
}

func TestServeDefaults(t *testing.T) {
	r := startServe(t, serveOptions{})
	client, conn := rlsClient(t, r.grpcAddr)
	// The built-in rider policy: token bucket, burst 10 at 5/s.
	for i := 0; i < 10; i++ {
		resp, err := client.ShouldRateLimit(context.Background(), rlsRequest("rider-api", "rider_id", "r-1"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode != rls.RateLimitResponse_OK {
			t.Fatalf("request %d: %v", i, resp)
		}
	}
	// The bucket is empty now and refills one unit per 200 ms of wall
	// time: one of the next 20 calls is over unless each took 200 ms.
	over := false
	for i := 0; i < 20 && !over; i++ {
		resp, err := client.ShouldRateLimit(context.Background(), rlsRequest("rider-api", "rider_id", "r-1"))
		if err != nil {
			t.Fatal(err)
		}
		over = resp.OverallCode == rls.RateLimitResponse_OVER_LIMIT
	}
	if !over {
		t.Error("the rider limit never refused")
	}
	h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health: %v %v", h, err)
	}
	// Server reflection lists the RLS service, so grpcurl needs no protos.
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	rr, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	var services []string
	for _, sv := range rr.GetListServicesResponse().GetService() {
		services = append(services, sv.GetName())
	}
	if !slices.Contains(services, "envoy.service.ratelimit.v3.RateLimitService") {
		t.Errorf("reflection lists %v", services)
	}
	resp, err := http.Post("http://"+r.httpAddr+"/v1/check", "application/json", strings.NewReader(`{"domain":"partner-api","descriptors":[{"entries":[{"key":"partner","value":"acme"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"algorithm":"sliding-log","allowed":true,"limit":500,"remaining":499`) {
		t.Errorf("HTTP check: %s %s", resp.Status, body)
	}
	for _, want := range []string{`msg="sluice serving"`, "grpc=" + r.grpcAddr, "http=http://" + r.httpAddr, "store=memory", `config="(built-in defaults)"`, "http_paths=" + strconv.Quote(strings.Join(httpPaths, ", "))} {
		if !strings.Contains(r.stderr.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, r.stderr)
		}
	}
	r.cancel()
	if code := <-r.done; code != exitOK {
		t.Errorf("exit %d after shutdown", code)
	}
	r.done <- exitOK // for the cleanup
}

// TestServeGRPCHealth: gRPC health knows the server (""), the RLS service
// by name, and the name envoyproxy/ratelimit registers, "ratelimit" (an
// Envoy cluster's grpc_health_check with service_name: ratelimit, or a
// Kubernetes grpc probe with service: ratelimit, which sluice answered
// NotFound: every replica unhealthy, and Envoy, failing open, admitted
// every request unlimited), all SERVING until the shutdown begins and
// NOT_SERVING from then on; any other name is NotFound.
func TestServeGRPCHealth(t *testing.T) {
	r := startServe(t, serveOptions{})
	_, conn := rlsClient(t, r.grpcAddr)
	hc := healthpb.NewHealthClient(conn)
	names := []string{"", "envoy.service.ratelimit.v3.RateLimitService", "ratelimit"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var watches []healthpb.Health_WatchClient
	for _, name := range names {
		h, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q): %v %v", name, h, err)
		}
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatal(err)
		}
		if h, err := w.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Watch(%q): %v %v", name, h, err)
		}
		watches = append(watches, w)
	}
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check of an unknown service: %v, want NotFound", err)
	}
	r.cancel()
	for i, w := range watches {
		if h, err := w.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("Watch(%q) after the shutdown began: %v %v, want NOT_SERVING", names[i], h, err)
		}
	}
	cancel() // end the watches: the graceful stop waits for them
	if code := <-r.done; code != exitOK {
		t.Errorf("exit %d", code)
	}
	r.done <- exitOK // for the cleanup
}

// TestGracefulShutdown starts a request, begins the shutdown while it is in
// flight, and checks that it is answered.
func TestGracefulShutdown(t *testing.T) {
	r := startServe(t, serveOptions{})
	conn, err := net.Dial("tcp", r.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"domain":"admin","descriptors":[{"entries":[{"key":"user","value":"ada"}]}]}`
	head := "POST /v1/check HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	// The server answers 100 Continue once its handler reads the body:
	// the request is in flight. (A request whose headers the server has
	// not read when the shutdown begins is dropped by net/http: waiting
	// only for the connection to be accepted made this test flaky.)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	in := bufio.NewReader(conn)
	res, err := http.ReadResponse(in, nil)
	if err != nil || res.StatusCode != http.StatusContinue {
		t.Fatalf("before the body: %v %v, want 100 Continue", res, err)
	}
	r.cancel()
	select {
	case <-r.stopping:
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown never began")
	}
	// The body, after the shutdown began.
	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatal(err)
	}
	res, err = http.ReadResponse(in, nil)
	if err != nil {
		t.Fatalf("the in-flight request was not answered: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(b), `"overall_code":"OK"`) {
		t.Errorf("in-flight answer: %s %s", res.Status, b)
	}
	if code := <-r.done; code != exitOK {
		t.Errorf("exit %d", code)
	}
	r.done <- exitOK
}

func TestServeReloadsConfigDir(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		t.Helper()
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "a.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	cfg := func(n string) string {
		return "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: " + n + "}\n"
	}
	write(cfg("1"))
	r := startServe(t, serveOptions{configDir: dir, headers: true})
	client, _ := rlsClient(t, r.grpcAddr)
	if resp, err := client.ShouldRateLimit(context.Background(), rlsRequest("d", "k", "h")); err != nil || len(resp.ResponseHeadersToAdd) != 2 || resp.ResponseHeadersToAdd[0].Key != "RateLimit-Policy" {
		t.Errorf("--response-headers: %v %v", resp, err)
	}
	limit := func() uint32 {
		t.Helper()
		req := rlsRequest("d", "k", "v")
		req.Descriptors[0].HitsAddend = nil
		resp, err := client.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Statuses[0].CurrentLimit.GetRequestsPerUnit()
	}
	if n := limit(); n != 1 {
		t.Fatalf("limit %d, want 1", n)
	}
	// Bounded polling: rewrite until the watcher (which may still be
	// starting) has reloaded.
	deadline := time.Now().Add(20 * time.Second)
	for limit() != 9 {
		if time.Now().After(deadline) {
			t.Fatalf("no reload; log:\n%s", r.stderr)
		}
		write(cfg("9"))
		waitLog(t, r.stderr, `msg="config loaded" dir=`)
	}
	write(cfg("nine"))
	waitLog(t, r.stderr, "config reload failed")
	if n := limit(); n != 9 {
		t.Errorf("after a bad reload the limit is %d, want 9", n)
	}
	if !strings.Contains(r.stderr.String(), `requests_per_unit: want a whole number, got \"nine\"`) {
		t.Errorf("the log does not name the problem:\n%s", r.stderr)
	}
}

// waitLog waits (bounded) for the log to contain s.
func waitLog(t *testing.T, log *syncBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(log.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q:\n%s", s, log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const gatewayConflictYAML = `domain: gateway
descriptors:
  - key: route
    value: GET /a/{x}
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: route
    value: GET /{y}/b
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 5}
`

func TestServeErrors(t *testing.T) {
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "a.yaml"), []byte("domain: a\nx: 1\ny: 2\n"), 0o644)
	conflict := t.TempDir()
	os.WriteFile(filepath.Join(conflict, "g.yaml"), []byte(gatewayConflictYAML), 0o644)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		args  []string
		code  int
		lines []string
	}{
		{[]string{"--store", "etcd://x"}, exitUsage, []string{`sluice serve: --store "etcd://x": want memory, or a redis://`}},
		{[]string{"--bogus"}, exitUsage, []string{"sluice serve: flag provided but not defined: -bogus"}},
		{[]string{"extra"}, exitUsage, []string{`sluice serve: unexpected argument "extra"`}},
		{[]string{"--upstream", "ftp://x"}, exitUsage, []string{`sluice serve: --upstream "ftp://x": want an http:// or https:// URL`}},
		{[]string{"--max-keys", "-5"}, exitUsage, []string{"sluice serve: --max-keys -5: must not be negative"}},
		{[]string{"--max-keys", "lots"}, exitUsage, []string{`sluice serve: --max-keys "lots": want auto or a whole number (0: no bound)`}},
		{[]string{"--allowed-hosts", "http://sluice.example.com"}, exitUsage, []string{`sluice serve: --allowed-hosts: allowed host "http://sluice.example.com": want a host name without scheme or port`}},
		{[]string{"--allowed-hosts", "a,,b"}, exitUsage, []string{`sluice serve: --allowed-hosts: allowed host "": want a host name, *.domain or *`}},
		{[]string{"--replicas", "-1"}, exitUsage, []string{"sluice serve: --replicas -1: must not be negative"}},
		{[]string{"--store-timeout", "-1s"}, exitUsage, []string{"sluice serve: --store-timeout -1s: must not be negative"}},
		{[]string{"--shutdown-timeout", "0s"}, exitUsage, []string{"sluice serve: --shutdown-timeout 0s: must be positive"}},
		{[]string{"--lame-duck", "-1s"}, exitUsage, []string{"sluice serve: --lame-duck -1s: must not be negative (0: none)"}},
		{[]string{"--procs", "0"}, exitUsage, []string{`sluice serve: --procs "0": want auto or a whole number of at least 1`}},
		{[]string{"--gateway-addr", "127.0.0.1:0"}, exitUsage, []string{"sluice serve: --gateway-addr: needs --upstream (gateway mode)"}},
		{[]string{"--gateway-domain", "edge"}, exitUsage, []string{"sluice serve: --gateway-domain: needs --upstream (gateway mode)"}},
		{[]string{"--trusted-proxies", "10.0.0.0/8"}, exitUsage, []string{"sluice serve: --trusted-proxies: needs --upstream (gateway mode)"}},
		{[]string{"--procs", "many"}, exitUsage, []string{`sluice serve: --procs "many": want auto or a whole number of at least 1`}},
		{[]string{"--config", bad, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}, exitFailure, []string{
			"sluice serve: " + filepath.Join(bad, "a.yaml") + ":2: x: unknown field",
			"sluice serve: " + filepath.Join(bad, "a.yaml") + ":3: y: unknown field",
		}},
		{[]string{"--config", conflict, "--upstream", "http://127.0.0.1:1", "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--gateway-addr", "127.0.0.1:0"}, exitFailure, []string{
			`sluice serve: server: gateway domain "gateway": route "GET /{y}/b" (` + filepath.Join(conflict, "g.yaml") + `:12) conflicts with route "GET /a/{x}" (` + filepath.Join(conflict, "g.yaml") + `:7)`,
		}},
		{[]string{"--http-addr", taken.Addr().String(), "--grpc-addr", "127.0.0.1:0"}, exitFailure, []string{"sluice serve: --http-addr: listen tcp " + taken.Addr().String()}},
	} {
		code, _, stderr := runSluice(t, "", append([]string{"serve"}, tc.args...)...)
		var lines []string // the error lines, without the log's
		for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
			if !strings.HasPrefix(l, "time=") {
				lines = append(lines, l)
			}
		}
		if code != tc.code || len(lines) != len(tc.lines) {
			t.Errorf("%v: exit %d, stderr:\n%s", tc.args, code, stderr)
			continue
		}
		for i, want := range tc.lines {
			if !strings.HasPrefix(lines[i], want) {
				t.Errorf("%v: line %d is %q, want it to start with %q", tc.args, i, lines[i], want)
			}
		}
	}
	code, out, _ := runSluice(t, "", "help", "serve")
	if code != exitOK || !strings.HasPrefix(out, "usage: sluice serve") {
		t.Errorf("help serve: %d %q", code, out)
	}
}

// TestServeProcs: --procs N sets GOMAXPROCS while serve runs, says so in
// its log, and puts the old value back when it stops.
func TestServeProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	r := startServe(t, serveOptions{procs: prev + 1})
	if got := runtime.GOMAXPROCS(0); got != prev+1 {
		t.Errorf("GOMAXPROCS %d while serving with --procs %d", got, prev+1)
	}
	if want := fmt.Sprintf("procs=%d", prev+1); !strings.Contains(r.stderr.String(), want) {
		t.Errorf("log does not say %s:\n%s", want, r.stderr)
	}
	r.stop(t)
	if got := runtime.GOMAXPROCS(0); got != prev {
		t.Errorf("GOMAXPROCS %d after serve, want %d back", got, prev)
	}
}

// TestServeProcsAuto: --procs auto says so in the log (unless a GOMAXPROCS
// variable or a single CPU leaves nothing to govern) and leaves the
// runtime's default in force when serve stops.
func TestServeProcsAuto(t *testing.T) {
	limit := runtime.GOMAXPROCS(0)
	want := fmt.Sprintf(`procs="auto, 1 to %d"`, limit)
	if os.Getenv("GOMAXPROCS") != "" || limit == 1 {
		want = fmt.Sprintf("procs=%d", limit)
	}
	r := startServe(t, serveOptions{procs: procsAuto})
	if !strings.Contains(r.stderr.String(), want) {
		t.Errorf("log does not say %s:\n%s", want, r.stderr)
	}
	r.stop(t)
	if got := runtime.GOMAXPROCS(0); got != limit {
		t.Errorf("GOMAXPROCS %d after serve, want the default %d back", got, limit)
	}
}

func TestServeGateway(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from upstream")
	}))
	defer upstream.Close()
	dir := t.TempDir()
	cfg := "domain: gateway\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: hour, requests_per_unit: 2}\n"
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startServe(t, serveOptions{configDir: dir, upstream: upstream.URL, gatewayDomain: "gateway"})
	for i, want := range []int{200, 200, 429} {
		resp, err := http.Get("http://" + r.gatewayAddr + "/anything")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == 200 && string(b) != "hello from upstream") {
			t.Errorf("request %d: %s %q", i, resp.Status, b)
		}
	}
	if !strings.Contains(r.stderr.String(), `msg="sluice gateway"`) {
		t.Errorf("the log does not mention the gateway:\n%s", r.stderr)
	}
}

// TestServeGRPCStreamsBounded: with default flags, one connection to the
// gRPC port that opens 3000 streams, sends their headers and never their
// message holds at most server.MaxConcurrentStreams of them: the server
// refuses the rest (RST_STREAM REFUSED_STREAM) before it answers a PING
// sent after them, and holds no more goroutines than the streams it
// accepted. Without the bound (grpc-go's default, 2^32-1 streams) each
// stalled stream held a goroutine for as long as the connection lived:
// 2,936 of them here.
func TestServeGRPCStreamsBounded(t *testing.T) {
	r := startServe(t, serveOptions{})
	conn, err := net.Dial("tcp", r.grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // the framer's writes: this goroutine and the reader's acks
	fr := http2.NewFramer(conn, conn)
	write := func(f func() error) error {
		mu.Lock()
		defer mu.Unlock()
		return f()
	}
	if err := write(func() error { return fr.WriteSettings() }); err != nil {
		t.Fatal(err)
	}
	// Read what the server sends, answering its SETTINGS and counting the
	// streams it refuses, until the ack of our PING: the server writes in
	// the order it reads, so every refusal of a stream opened before the
	// PING comes before its ack.
	refused := make(chan int, 1)
	go func() {
		n := 0
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				refused <- -1
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					write(fr.WriteSettingsAck)
				}
			case *http2.RSTStreamFrame:
				if f.ErrCode == http2.ErrCodeRefusedStream {
					n++
				}
			case *http2.PingFrame:
				if f.IsAck() {
					refused <- n
					return
				}
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", rls.RateLimitService_ShouldRateLimit_FullMethodName},
		{":authority", "sluice"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := hb.Bytes()

	runtime.GC()
	before := runtime.NumGoroutine()
	const streams = 3000
	for i := range streams {
		if err := write(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndHeaders: true})
		}); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if err := write(func() error { return fr.WritePing(false, [8]byte{1}) }); err != nil {
		t.Fatal(err)
	}
	var n int
	select {
	case n = <-refused:
	case <-time.After(30 * time.Second):
		t.Fatal("no PING ack in 30 s")
	}
	// Each stream accepted was handed to a handler before the PING was
	// read: the count is taken.
	grew := runtime.NumGoroutine() - before
	if want := streams - server.MaxConcurrentStreams; n != want {
		t.Errorf("%d stalled streams on one connection: %d refused, want %d (all past MaxConcurrentStreams = %d)",
			streams, n, want, server.MaxConcurrentStreams)
	}
	if grew > server.MaxConcurrentStreams+32 {
		t.Errorf("%d stalled streams on one connection: serve holds %d more goroutines (%d before); want at most MaxConcurrentStreams = %d (+32)",
			streams, grew, before, server.MaxConcurrentStreams)
	}
}

// TestServeDecisionDurationBuckets: sluice_decision_duration_seconds has
// finite buckets past the default --store-timeout (redisstore's 3 s), and
// one between the 0.1 s it used to stop at and that timeout: a decision
// that waited for a slow or dead Redis (up to the timeout) is in a bucket
// of its own, not only in +Inf with every other slow one.
func TestServeDecisionDurationBuckets(t *testing.T) {
	r := startServe(t, serveOptions{})
	client, _ := rlsClient(t, r.grpcAddr)
	if _, err := client.ShouldRateLimit(context.Background(), rlsRequest("sluice-demo", "api_key", "k")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + r.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var les []float64
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, `sluice_decision_duration_seconds_bucket{api="grpc",le="`)
		if !ok {
			continue
		}
		le, _, _ := strings.Cut(rest, `"`)
		if le == "+Inf" {
			continue
		}
		v, err := strconv.ParseFloat(le, 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		les = append(les, v)
	}
	timeout := redisstore.DefaultTimeout.Seconds()
	if len(les) == 0 || slices.Max(les) <= timeout {
		t.Fatalf("sluice_decision_duration_seconds buckets %v: want one past the default store timeout, %v s", les, timeout)
	}
	if !slices.ContainsFunc(les, func(le float64) bool { return le > 0.1 && le < timeout }) {
		t.Errorf("sluice_decision_duration_seconds buckets %v: want one between 0.1 s and the store timeout, %v s", les, timeout)
	}
}

// httpStatus is the status of GET path on serve's HTTP address, or 0 and
// the error when there is no answer.
func httpStatus(addr, path string) (int, error) {
	c := http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestServeLameDuck: on SIGTERM serve first answers /readyz 503 (and gRPC
// health NOT_SERVING) while it still serves every request, for
// --lame-duck, and only then drains and exits 0. On main SIGTERM closed the
// listeners at once: /readyz never answered 503, and a request sent
// meanwhile (Envoy's, which with failure_mode_deny: false then passes
// unlimited) found the port closed. The lame duck's end is the test's
// (o.after), so only the order of events is asserted.
func TestServeLameDuck(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	lameDuckOver := make(chan time.Time)
	asked := make(chan time.Duration, 1)
	draining := make(chan struct{})
	r := startServe(t, serveOptions{
		lameDuck:   DefaultLameDuck,
		signals:    sigs,
		after:      func(d time.Duration) <-chan time.Time { asked <- d; return lameDuckOver },
		onDraining: func() { close(draining) },
	})
	client, conn := rlsClient(t, r.grpcAddr)
	if code, err := httpStatus(r.httpAddr, "/readyz"); code != 200 {
		t.Fatalf("/readyz before: %d %v", code, err)
	}
	sigs <- syscall.SIGTERM
	<-r.stopping
	if d := <-asked; d != DefaultLameDuck {
		t.Errorf("lame duck of %v, want --lame-duck's %v", d, DefaultLameDuck)
	}
	// The lame duck: not ready, yet everything is served.
	if code, err := httpStatus(r.httpAddr, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz in the lame duck: %d %v, want 503", code, err)
	}
	if code, err := httpStatus(r.httpAddr, "/healthz"); code != 200 {
		t.Errorf("/healthz in the lame duck: %d %v, want 200", code, err)
	}
	if h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || h.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health in the lame duck: %v %v, want NOT_SERVING", h, err)
	}
	// A new connection, as Envoy's after a GOAWAY elsewhere.
	newClient, _ := rlsClient(t, r.grpcAddr)
	for _, c := range []rls.RateLimitServiceClient{client, newClient} {
		resp, err := c.ShouldRateLimit(context.Background(), rlsRequest("rider-api", "rider_id", "r-1"))
		if err != nil || resp.OverallCode != rls.RateLimitResponse_OK {
			t.Errorf("RLS in the lame duck: %v %v, want OK", resp, err)
		}
	}
	select {
	case <-draining:
		t.Fatal("the drain began before the lame duck ended")
	case code := <-r.done:
		t.Fatalf("serve exited (%d) before the lame duck ended", code)
	default:
	}
	close(lameDuckOver)
	<-draining
	if code := <-r.done; code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
	r.done <- exitOK // for startServe's cleanup
	if _, err := httpStatus(r.httpAddr, "/healthz"); err == nil {
		t.Error("serve still answers after it exited")
	}
	log := r.stderr.String()
	i, j, k := strings.Index(log, `msg="lame duck`), strings.Index(log, `msg="shutting down`), strings.Index(log, `msg=stopped`)
	if i < 0 || j < i || k < j {
		t.Errorf("the log does not say lame duck, shutting down, stopped, in that order:\n%s", log)
	}
}

// TestServeLameDuckServesRLQS: RLQS is served through the lame duck as RLS
// is (README, Shutdown: "every request is still served"): a stream open at
// SIGTERM stays open, and one opened in the lame duck (an Envoy
// reconnecting through a Service that still routes to this pod) is
// answered. Both end, UNAVAILABLE, when the drain begins, so the graceful
// stop need not wait for them. On main SIGTERM drained RLQS at once: every
// stream opened in the lame duck was refused UNAVAILABLE.
func TestServeLameDuckServesRLQS(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	lameDuckOver := make(chan time.Time)
	r := startServe(t, serveOptions{
		lameDuck: DefaultLameDuck,
		signals:  sigs,
		after:    func(time.Duration) <-chan time.Time { return lameDuckOver },
	})
	_, conn := rlsClient(t, r.grpcAddr)
	client := rlqspb.NewRateLimitQuotaServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// open opens a stream, reports a bucket and reads its assignment.
	open := func() (rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient, error) {
		st, err := client.StreamRateLimitQuotas(ctx)
		if err != nil {
			return nil, err
		}
		if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "rider-api", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			{BucketId: &rlqspb.BucketId{Bucket: map[string]string{"rider_id": "r-1"}}, NumRequestsAllowed: 1},
		}}); err != nil {
			return nil, err
		}
		_, err = st.Recv()
		return st, err
	}
	before, err := open()
	if err != nil {
		t.Fatalf("an RLQS stream before SIGTERM: %v", err)
	}
	beforeEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := before.Recv(); err != nil {
				beforeEnded <- err
				return
			}
		}
	}()
	sigs <- syscall.SIGTERM
	<-r.stopping
	during, err := open()
	if err != nil {
		t.Fatalf("an RLQS stream opened in the lame duck: %v; want it served, as every request is until the lame duck ends", err)
	}
	select {
	case err := <-beforeEnded:
		t.Errorf("the RLQS stream open at SIGTERM ended in the lame duck: %v", err)
	default:
	}
	close(lameDuckOver)
	duringEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := during.Recv(); err != nil {
				duringEnded <- err
				return
			}
		}
	}()
	for name, ended := range map[string]chan error{"open at SIGTERM": beforeEnded, "opened in the lame duck": duringEnded} {
		if err := <-ended; status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "shutting down") {
			t.Errorf("the RLQS stream %s, at the drain: %v; want UNAVAILABLE, shutting down", name, err)
		}
	}
	if code := <-r.done; code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
	r.done <- exitOK // for startServe's cleanup
}

// TestServeInterruptSkipsLameDuck: SIGINT (a human's Ctrl-C) drains at
// once, with no lame duck; a second SIGINT while in-flight requests finish
// exits at once, status 1 (on main it was ignored, and serve waited out
// --shutdown-timeout).
func TestServeInterruptSkipsLameDuck(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	draining := make(chan struct{})
	r := startServe(t, serveOptions{
		lameDuck:   DefaultLameDuck,
		signals:    sigs,
		after:      func(time.Duration) <-chan time.Time { t.Error("SIGINT waited for a lame duck"); return nil },
		onDraining: func() { close(draining) },
	})
	// A request in flight (its handler reads the body, which never
	// comes), so that the drain waits for it.
	conn, err := net.Dial("tcp", r.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := "POST /v1/check HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	in := bufio.NewReader(conn)
	if res, err := http.ReadResponse(in, nil); err != nil || res.StatusCode != http.StatusContinue {
		t.Fatalf("before the body: %v %v, want 100 Continue", res, err)
	}
	sigs <- os.Interrupt
	<-draining
	select {
	case code := <-r.done:
		t.Fatalf("serve exited (%d) with a request in flight, before the second signal", code)
	default:
	}
	sigs <- os.Interrupt
	if code := <-r.done; code != exitFailure {
		t.Errorf("after a second SIGINT: exit %d, want %d", code, exitFailure)
	}
	r.done <- exitOK // for startServe's cleanup
	if !strings.Contains(r.stderr.String(), `msg="second signal: exiting now, in-flight requests cut off" signal=interrupt`) {
		t.Errorf("the log does not say why:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr.String(), "lame duck") {
		t.Errorf("SIGINT: a lame duck:\n%s", r.stderr)
	}
}

// TestServeSignalsProcess: the same with real signals to a real process
// with --lame-duck 1h: after SIGTERM /readyz answers 503 while RLS is still
// served, and a second SIGTERM exits at once (status 1), an hour before the
// lame duck would end; SIGINT to another one exits 0 without one.
func TestServeSignalsProcess(t *testing.T) {
	addr, httpAddr, cmd, exited := startServeProcessOn(t, "", "--lame-duck", "1h")
	client, _ := rlsClient(t, addr)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The signal is handled when /readyz turns 503; until then it is 200.
	deadline := time.Now().Add(time.Minute)
	for {
		code, err := httpStatus(httpAddr, "/readyz")
		if code == http.StatusServiceUnavailable {
			break
		}
		if code != 200 || time.Now().After(deadline) {
			t.Fatalf("after SIGTERM /readyz answered %d %v, want 200 and then 503", code, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := client.ShouldRateLimit(context.Background(), rlsRequest("rider-api", "rider_id", "r-1"))
	if err != nil || resp.OverallCode != rls.RateLimitResponse_OK {
		t.Errorf("RLS in the lame duck: %v %v, want OK", resp, err)
	}
	select {
	case err := <-exited:
		t.Fatalf("exited in the lame duck: %v", err)
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailure {
			t.Errorf("after a second SIGTERM: %v, want exit status %d", err, exitFailure)
		}
	case <-time.After(time.Minute):
		t.Fatal("a second SIGTERM did not end the lame duck")
	}

	_, _, cmd, exited = startServeProcessOn(t, "", "--lame-duck", "1h")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGINT: %v, want exit 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("SIGINT waited for the lame duck")
	}
}
