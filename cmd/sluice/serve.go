// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/procs"
	"github.com/sluicehq/sluice/internal/rawconn"
	"github.com/sluicehq/sluice/internal/server"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
)

// streamWorkers is the least number of gRPC server workers: goroutines
// that run calls.
const streamWorkers = 64

// grpcWindow is the gRPC server's flow-control window, per stream and per
// connection: far more than any RLS request or response, and fixed.
const grpcWindow = 1 << 20

const serveUsage = `usage: sluice serve [--config DIR] [--store URL] [--http-addr ADDR] [--grpc-addr ADDR]
                    [--max-keys auto|N] [--replicas N] [--redis-single-slot NAME]
                    [--store-timeout D]
                    [--shutdown-timeout D] [--procs auto|N]
                    [--response-headers] [--legacy-headers] [--merge-domains] [--shadow-mode]
                    [--upstream URL [--gateway-addr ADDR] [--gateway-domain D] [--trusted-proxies CIDRS]]

Serve runs the rate limit service: Envoy's rate limit service API (RLS v3,
envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit), the gRPC
health service and server reflection (for grpcurl) over gRPC, and over HTTP a JSON API (POST /v1/check,
POST /v1/reset, GET /v1/rules, POST /v1/simulate), Prometheus metrics (/metrics), /healthz, /readyz
and a live page at / (the rules, their recent decisions, the keys nearest their limits, and a
panel that runs a burst through a rule on a throwaway store).

Flags:

  --config DIR        a directory of YAML files in the format of Envoy's
                      ratelimit service, with sluice's extensions; watched
                      and reloaded on change (a bad change is logged and the
                      configuration in force stays). Default: the built-in
                      example configuration (see 'sluice config check').
  --store URL         memory (also mem:// or memory://), the default; or
                      redis://host:port/db, rediss://host:port,
                      redis+cluster://host1:port1,host2:port2 (or rediss+),
                      redis://s1:26379?addr=s2:26379&master_set=NAME for
                      Sentinel (user:password@ is the master's; the
                      sentinels' own is &sentinel_password=...)
  --merge-domains     let several files add descriptors to one domain
                      (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); a
                      top-level descriptor two files both define is an
                      error. Default: a domain is defined in one file
  --shadow-mode       put every rule in shadow mode (envoyproxy/ratelimit's
                      SHADOW_MODE): checked, counted and reported, never
                      refusing; a limit the request carries still applies
  --http-addr ADDR    the HTTP listen address (default 127.0.0.1:8080)
  --grpc-addr ADDR    the gRPC listen address (default 127.0.0.1:8081)
  --max-keys auto|N   the memory store (and the local fallback store) hold
                      at most N keys, evicting when full: first keys whose
                      state is already idle, then (counted in
                      sluice_store_evictions_total{reason="forced"}) the
                      soonest-idle keys, forgiving what they still owed,
                      which loses exactness for those keys. The default,
                      auto, is 1/4 of the memory (the cgroup's memory
                      limit if set, else MemAvailable at start) divided
                      by 128 bytes per key, at least 10000; 0 means no
                      bound. Idle keys are dropped exactly when they
                      expire either way
  --replicas N        how many serve processes share the store, for the
                      rules that fail local (the default failure mode):
                      while the store is unreachable each decides alone
                      with 1/N of each limit. Default: counted by
                      heartbeats in Redis (1 on the memory store); the
                      last count is kept during an outage
  --redis-single-slot NAME  on a Redis Cluster, keep every key in the
                      hash slot of {NAME}, so that requests with several
                      descriptors stay all-or-nothing (at the price of one
                      shard). Without it, such a request whose keys fall in
                      different slots cannot be decided atomically: it is
                      answered by the rules' failure modes, and the store
                      error is logged and counted
  --store-timeout D   the ceiling on one Redis call (default 3s). A call
                      is bounded by the caller's deadline (Envoy's gRPC
                      deadline, its rate limit timeout) less 2ms and a
                      tenth of the time left, to answer in time (16ms of
                      Envoy's default 20ms), or by D when that is sooner
                      or the caller has none. A call that runs out of its
                      caller's deadline is answered by the rule's failure
                      mode but is not counted as a Redis failure; errors
                      and calls that run out of D are, and 5 in a row
                      open a circuit breaker (probed every 200ms)
  --response-headers  RLS answers ask Envoy to add RateLimit-Policy and
                      RateLimit (draft-ietf-httpapi-ratelimit-headers-10)
                      and, on OVER_LIMIT, Retry-After to the response
  --legacy-headers    also X-RateLimit-Limit, -Remaining and -Reset
  --shutdown-timeout D  how long in-flight requests get to finish after
                      SIGTERM or SIGINT (default 15s)
  --procs auto|N      run Go code on at most N CPUs at once (GOMAXPROCS).
                      The default, auto, uses as few as the load needs,
                      from one up to GOMAXPROCS's default (the CPUs, or
                      the container's CPU limit, at start), which costs
                      less CPU per request at moderate load: it adds
                      CPUs at once when serve's CPU use nears 85% of
                      them, and takes one away after a second in which
                      the use fitted one fewer. It sees only serve's own
                      CPU use: on a host whose CPUs other processes keep
                      busy, set N. A GOMAXPROCS environment variable
                      overrides auto.

Gateway mode:

  --upstream URL      also run a reverse proxy to URL that enforces the
                      HTTP policies of one domain of the configuration
                      (through httplimit: 429 with RateLimit headers)
  --gateway-addr ADDR its listen address (default 127.0.0.1:8082)
  --gateway-domain D  the domain (default gateway). Its rules are counted
                      by the descriptor key: remote_address (the client
                      IP) or header:NAME (a request header), at the top
                      level (every request) or under key route with a Go
                      ServeMux pattern as the value ("POST /v1/quotes")
  --trusted-proxies CIDRS  comma-separated proxy networks whose
                      X-Forwarded-For is believed (default: none; the
                      client IP is the peer address)

Tracing (OpenTelemetry) is off unless the standard environment asks for
it: OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp) turns on
spans for RLS and HTTP calls and for store calls, exported over OTLP
(OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf, the default, or grpc); the
other OTEL_* variables apply as usual.
Failure modes (failure_mode in a rule): local, the default, decides with
this replica's share of the limit while the store fails (the fleet stays
available and within a bound: at most about one extra limit, or burst, per
outage shorter than the period; see the sluice package documentation); open
admits; closed refuses.

Logs go to standard error. On SIGTERM or SIGINT, serve stops accepting new
requests, lets in-flight ones finish, and exits 0. A bad flag exits 2; a
configuration that does not load, an unreachable store or an address in use
exits 1, each problem on one line.
`

// serveOptions is the parsed command line of serve.
type serveOptions struct {
	configDir       string
	storeURL        string
	httpAddr        string
	grpcAddr        string
	storeTimeout    time.Duration // 0: the store's default
	maxKeys         int           // memory store bound; 0: auto (defaultMaxKeys); maxKeysNone: none
	singleSlot      string        // redisstore.WithSingleSlot when not empty
	upstream        string        // gateway mode when not empty
	gatewayAddr     string
	gatewayDomain   string
	trustedProxies  string // comma-separated CIDRs
	headers         bool   // RLS response headers
	legacyHeaders   bool
	mergeDomains    bool // config.WithMergeDomains
	shadowMode      bool // server.WithShadowMode
	shutdownTimeout time.Duration
	reloadDebounce  time.Duration
	procs           int // GOMAXPROCS if > 0; procsAuto: governed; 0: left alone (tests in process)
	replicas        int // --replicas; 0: counted (heartbeats on Redis, 1 on memory)

	// For tests: called once both listeners are up, and when shutdown
	// begins.
	onListening func(httpAddr, grpcAddr string)
	onStopping  func()
	onGateway   func(addr string)
}

func runServe(e env, args []string) int {
	const prefix = "sluice serve"
	fset := flag.NewFlagSet(prefix, flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	fset.Usage = func() {}
	o := serveOptions{reloadDebounce: 250 * time.Millisecond}
	fset.StringVar(&o.configDir, "config", "", "")
	fset.StringVar(&o.storeURL, "store", "memory", "")
	fset.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:8080", "")
	fset.StringVar(&o.grpcAddr, "grpc-addr", "127.0.0.1:8081", "")
	fset.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 15*time.Second, "")
	fset.DurationVar(&o.storeTimeout, "store-timeout", 0, "")
	maxKeysFlag := fset.String("max-keys", "auto", "")
	fset.IntVar(&o.replicas, "replicas", 0, "")
	fset.StringVar(&o.singleSlot, "redis-single-slot", "", "")
	fset.StringVar(&o.upstream, "upstream", "", "")
	fset.BoolVar(&o.headers, "response-headers", false, "")
	fset.BoolVar(&o.legacyHeaders, "legacy-headers", false, "")
	fset.BoolVar(&o.mergeDomains, "merge-domains", false, "")
	fset.BoolVar(&o.shadowMode, "shadow-mode", false, "")
	fset.StringVar(&o.gatewayAddr, "gateway-addr", "127.0.0.1:8082", "")
	fset.StringVar(&o.gatewayDomain, "gateway-domain", server.GatewayDomain, "")
	fset.StringVar(&o.trustedProxies, "trusted-proxies", "", "")
	procsFlag := fset.String("procs", "auto", "")
	err := fset.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		io.WriteString(e.stdout, serveUsage)
		return exitOK
	}
	if err != nil {
		return e.fail(exitUsage, prefix, "%v (run 'sluice help serve' for usage)", err)
	}
	if fset.NArg() > 0 {
		return e.fail(exitUsage, prefix, "unexpected argument %q (run 'sluice help serve' for usage)", fset.Arg(0))
	}
	if strings.ContainsAny(o.singleSlot, "{}") {
		return e.fail(exitUsage, prefix, "--redis-single-slot %q: must not contain { or }", o.singleSlot)
	}
	if *maxKeysFlag != "auto" {
		n, err := strconv.Atoi(*maxKeysFlag)
		switch {
		case err != nil:
			return e.fail(exitUsage, prefix, "--max-keys %q: want auto or a whole number (0: no bound)", *maxKeysFlag)
		case n < 0:
			return e.fail(exitUsage, prefix, "--max-keys %d: must not be negative", n)
		case n == 0:
			o.maxKeys = maxKeysNone
		default:
			o.maxKeys = n
		}
	}
	if o.replicas < 0 {
		return e.fail(exitUsage, prefix, "--replicas %d: must not be negative", o.replicas)
	}
	if o.storeTimeout < 0 {
		return e.fail(exitUsage, prefix, "--store-timeout %v: must not be negative", o.storeTimeout)
	}
	if o.upstream != "" {
		u, err := url.Parse(o.upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return e.fail(exitUsage, prefix, "--upstream %q: want an http:// or https:// URL with a host", o.upstream)
		}
	}
	if o.shutdownTimeout <= 0 {
		return e.fail(exitUsage, prefix, "--shutdown-timeout %v: must be positive", o.shutdownTimeout)
	}
	o.procs = procsAuto
	if *procsFlag != "auto" {
		n, err := strconv.Atoi(*procsFlag)
		if err != nil || n < 1 {
			return e.fail(exitUsage, prefix, "--procs %q: want auto or a whole number of at least 1", *procsFlag)
		}
		o.procs = n
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return serve(ctx, e, o)
}

// maxKeysNone is serveOptions.maxKeys for --max-keys 0: no bound.
const maxKeysNone = -1

// procsAuto is serveOptions.procs for --procs auto.
const procsAuto = -1

// governProcs puts --procs in force: n Ps (GOMAXPROCS), or with procsAuto
// the governor of internal/procs, which keeps as few as the load needs,
// until ctx ends. A GOMAXPROCS environment variable wins over auto. It
// returns what is in force, for the log, and a function that undoes it.
func governProcs(ctx context.Context, n int) (inForce string, undo func()) {
	if n > 0 {
		prev := runtime.GOMAXPROCS(n)
		return strconv.Itoa(n), func() { runtime.GOMAXPROCS(prev) }
	}
	limit := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" || limit == 1 || n == 0 {
		return strconv.Itoa(limit), func() {}
	}
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		procs.Run(gctx)
	}()
	return fmt.Sprintf("auto, 1 to %d", limit), func() { cancel(); <-done }
}

// serve runs the service until ctx ends, then shuts down gracefully, and
// returns the exit status.
func serve(ctx context.Context, e env, o serveOptions) int {
	const prefix = "sluice serve"
	log := slog.New(slog.NewTextHandler(e.stderr, nil))

	maxKeys := o.maxKeys
	switch maxKeys {
	case 0:
		maxKeys = defaultMaxKeys()
	case maxKeysNone:
		maxKeys = 0
	}
	store, closeStore, err := openServeStore(o.storeURL, o.storeTimeout, maxKeys, o.singleSlot)
	if err != nil {
		code := exitFailure
		var u usageError
		if errors.As(err, &u) {
			code = exitUsage
		}
		return e.fail(code, prefix, "%v", err)
	}
	defer closeStore()
	fb, err := startFallback(ctx, store, o.replicas, maxKeys, log)
	if err != nil {
		return e.fail(exitFailure, prefix, "%v", err)
	}
	defer fb.stop()
	ms, _ := store.(*memstore.Store)

	tracing, err := startTracing(ctx, log)
	if err != nil {
		return e.fail(exitUsage, prefix, "%v", err)
	}
	defer stopTracing(tracing, log)
	store = tracing.Store(store)

	var loadOpts []config.Option
	if o.mergeDomains {
		loadOpts = append(loadOpts, config.WithMergeDomains())
	}
	opts := []server.Option{server.WithLogger(log), server.WithConfigOptions(loadOpts...), server.WithFallback(fb.local, fb.replicas)}
	if ms != nil {
		opts = append(opts, server.WithCollector(newStoreCollector(ms, maxKeys)))
	}
	if o.shadowMode {
		opts = append(opts, server.WithShadowMode())
	}
	if o.headers || o.legacyHeaders {
		opts = append(opts, server.WithResponseHeaders(o.legacyHeaders))
	}
	srv, err := server.New(store, opts...)
	if err != nil {
		return e.fail(exitFailure, prefix, "%v", err)
	}
	var cfg *config.Config
	source := o.configDir
	if o.configDir == "" {
		source = "(built-in defaults)"
		cfg, err = config.Default()
	} else {
		cfg, err = config.LoadDir(o.configDir, loadOpts...)
	}
	if err != nil {
		return failEach(e, prefix, err)
	}
	if err := srv.Apply(cfg); err != nil {
		return e.fail(exitFailure, prefix, "%v", err)
	}
	log.Info("config loaded", "config", source, "summary", cfg.Summary(), "domains", strings.Join(cfg.Domains(), ","))

	httpLis, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return e.fail(exitFailure, prefix, "--http-addr: %v", err)
	}
	grpcLis, err := net.Listen("tcp", o.grpcAddr)
	if err != nil {
		httpLis.Close()
		return e.fail(exitFailure, prefix, "--grpc-addr: %v", err)
	}

	var (
		gwSrv *http.Server
		gwLis net.Listener
	)
	if o.upstream != "" {
		u, _ := url.Parse(o.upstream) // checked by runServe
		var ipOpts []httplimit.IPOption
		if o.trustedProxies != "" {
			ipOpts = append(ipOpts, httplimit.TrustProxies(httplimit.XForwardedFor, strings.Split(o.trustedProxies, ",")...))
		}
		ip, err := httplimit.NewClientIP(ipOpts...)
		if err != nil {
			httpLis.Close()
			grpcLis.Close()
			return e.fail(exitUsage, prefix, "--trusted-proxies: %v", err)
		}
		gwLis, err = net.Listen("tcp", o.gatewayAddr)
		if err != nil {
			httpLis.Close()
			grpcLis.Close()
			return e.fail(exitFailure, prefix, "--gateway-addr: %v", err)
		}
		gwSrv = &http.Server{Handler: tracing.HTTPHandler(srv.Gateway(u, o.gatewayDomain, ip), "sluice gateway"), ReadHeaderTimeout: 10 * time.Second}
	}

	g := grpc.NewServer(
		// Enough long-lived workers that a call does not start a
		// goroutine of its own (whose stack then grows as it runs)
		// while others wait for Redis: with one worker per CPU, stack
		// growth was 11% of serve's CPU at 16 calls in flight.
		grpc.NumStreamWorkers(uint32(max(streamWorkers, 8*runtime.GOMAXPROCS(0)))),
		// Fixed flow-control windows, which turn off grpc-go's bandwidth
		// estimation: its PINGs cost a read and a write system call each
		// and buy nothing for RLS's small messages. Measured at −13 %
		// server CPU per request on Redis with 16 calls in flight
		// (BENCHMARKS.md).
		grpc.InitialWindowSize(grpcWindow),
		grpc.InitialConnWindowSize(grpcWindow),
		tracing.GRPCServerOption(), // OTEL_* environment; none by default
	)
	srv.RegisterGRPC(g)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g) // for grpcurl and friends
	hsrv := &http.Server{Handler: tracing.HTTPHandler(srv.Handler(), "sluice"), ReadHeaderTimeout: 10 * time.Second}

	procsInForce, undoProcs := governProcs(ctx, o.procs)
	defer undoProcs()

	errc := make(chan error, 2)
	// Raw reads and writes on the gRPC connections: see internal/rawconn.
	go func() { errc <- fmt.Errorf("gRPC: %w", g.Serve(rawconn.Listen(grpcLis))) }()
	go func() { errc <- fmt.Errorf("HTTP: %w", hsrv.Serve(httpLis)) }()
	if gwSrv != nil {
		go func() { errc <- fmt.Errorf("gateway: %w", gwSrv.Serve(gwLis)) }()
		log.Info("sluice gateway", "listen", "http://"+gwLis.Addr().String(), "upstream", o.upstream, "domain", o.gatewayDomain)
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	if o.configDir != "" {
		go func() {
			defer close(watchDone)
			if err := srv.Watch(watchCtx, o.configDir, o.reloadDebounce, nil); err != nil {
				log.Error("config watcher stopped; reloads are off", "error", err)
			}
		}()
	} else {
		close(watchDone)
	}

	log.Info("sluice serving",
		"grpc", grpcLis.Addr().String(), "grpc_services", "envoy.service.ratelimit.v3.RateLimitService, grpc.health.v1.Health, reflection",
		"http", "http://"+httpLis.Addr().String(), "http_paths", "GET / (live page), POST /v1/check, POST /v1/reset, GET /v1/rules, POST /v1/simulate, GET /metrics, /healthz, /readyz",
		"store", storeName(o.storeURL), "config", source, "procs", procsInForce, "replicas", fb.describe, "max_keys", maxKeys)
	if o.onGateway != nil && gwLis != nil {
		o.onGateway(gwLis.Addr().String())
	}
	if o.onListening != nil {
		o.onListening(httpLis.Addr().String(), grpcLis.Addr().String())
	}

	status := exitOK
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests", "timeout", o.shutdownTimeout)
	case err := <-errc:
		log.Error("server failed; shutting down", "error", err)
		e.fail(exitFailure, prefix, "%v", err)
		status = exitFailure
	}
	srv.SetStopping()
	hs.Shutdown()
	stopWatch()
	if o.onStopping != nil {
		o.onStopping()
	}

	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	grpcDone := make(chan struct{})
	go func() { g.GracefulStop(); close(grpcDone) }()
	if gwSrv != nil {
		if err := gwSrv.Shutdown(sctx); err != nil {
			log.Warn("gateway shutdown cut short", "error", err)
			gwSrv.Close()
		}
	}
	if err := hsrv.Shutdown(sctx); err != nil {
		log.Warn("HTTP shutdown cut short", "error", err)
		hsrv.Close()
	}
	select {
	case <-grpcDone:
	case <-sctx.Done():
		log.Warn("gRPC shutdown cut short: closing open streams")
		g.Stop()
		<-grpcDone
	}
	<-watchDone
	if err := srv.ReleaseLeases(sctx); err != nil { // give other processes what leases held
		log.Warn("returning leases cut short", "error", err)
	}
	log.Info("stopped")
	return status
}

// usageError is an error in a flag's value (exit status 2).
type usageError struct{ error }

// openServeStore opens the store --store names.
func openServeStore(raw string, timeout time.Duration, maxKeys int, singleSlot string) (store sluice.Store, closeFn func() error, err error) {
	switch raw {
	case "memory", "mem://", "memory://":
		s := memstore.New(memstore.WithMaxKeys(maxKeys))
		return s, s.Close, nil
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok || !strings.HasPrefix(scheme, "redis") {
		return nil, nil, usageError{fmt.Errorf("--store %q: want memory, or a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL", storeName(raw))}
	}
	var opts []redisstore.Option
	if timeout > 0 {
		opts = append(opts, redisstore.WithTimeout(timeout))
	}
	if singleSlot != "" {
		opts = append(opts, redisstore.WithSingleSlot(singleSlot))
	}
	s, err := redisstore.Open(raw, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("--store: %v", err)
	}
	return s, s.Close, nil
}

// storeName is --store for the log, without a password.
func storeName(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = "***@" + rest[i+1:]
	}
	return scheme + "://" + rest
}
