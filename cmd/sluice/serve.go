// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
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
	if attrs := envoyEnvironment(os.Getenv); attrs != nil {
		log.Warn("envoyproxy/ratelimit's environment variables are set; sluice serve reads only its flags and ignores them: each is named with what takes its place (README: Coming from envoyproxy/ratelimit)", attrs...)
	}

	maxKeys := o.maxKeys
	switch maxKeys {
	case 0:
		maxKeys = defaultMaxKeys()
	case maxKeysNone:
		maxKeys = 0
	}
	store, closeStore, err := openServeStore(o.storeURL, o.storeTimeout, maxKeys, o.singleSlot, o.rawSockets, logRecovered(log, storeName(o.storeURL)))
	if err != nil {
		code := exitFailure
		var u usageError
		if errors.As(err, &u) {
			code = exitUsage
		}
		return e.fail(code, prefix, "%v", err)
	}
	defer closeStore()
	if rs, ok := store.(*redisstore.Store); ok {
		// Not fatal: a fleet must start while Redis restarts, and each
		// rule's failure mode answers until it is back. But say so.
		if err := rs.Ping(ctx); err != nil {
			log.Warn("the store does not answer; serving, with each rule's failure mode deciding until it does", "store", storeName(o.storeURL), "error", err)
		}
	}
	fb, err := startFallback(ctx, store, o.replicas, maxKeys, log)
	if err != nil {
		return e.fail(exitFailure, prefix, "%v", err)
	}
	defer fb.stop()
	ms, _ := store.(*memstore.Store)
	rs, _ := store.(*redisstore.Store)

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
	opts := []server.Option{server.WithLogger(log), server.WithConfigOptions(loadOpts...), server.WithFallback(fb.local, fb.replicas), server.WithStoreName(storeName(o.storeURL))}
	if ms == nil {
		ms = fb.local // on Redis, sluice_store_* show the local fallback store
	}
	opts = append(opts, server.WithCollector(newStoreCollector(ms, maxKeys)))
	if rs != nil {
		opts = append(opts, server.WithCollector(newRedisCollector(rs)))
	}
	if o.shadowMode {
		opts = append(opts, server.WithShadowMode())
	}
	if o.headers || o.legacyHeaders {
		opts = append(opts, server.WithResponseHeaders(o.legacyHeaders))
	}
	if len(o.allowedHosts) > 0 {
		opts = append(opts, server.WithAllowedHosts(o.allowedHosts...))
	}
	tokens, err := adminTokens(o.adminTokenFile)
	if err != nil {
		return e.fail(exitUsage, prefix, "%v", err)
	}
	if len(tokens) > 0 {
		opts = append(opts, server.WithAdminTokens(tokens...))
	}
	srv, err := server.New(store, opts...)
	if err != nil {
		return e.fail(exitFailure, prefix, "%v", err)
	}
	// The gateway before the configuration: Apply builds its policies and
	// refuses a configuration whose policies do not build.
	var gw *server.Gateway
	if o.upstream != "" {
		u, _ := url.Parse(o.upstream) // checked by runServe
		var ipOpts []clientip.Option
		if o.trustedProxies != "" {
			ipOpts = append(ipOpts, clientip.TrustProxies(clientip.XForwardedFor, strings.Split(o.trustedProxies, ",")...))
		}
		ip, err := clientip.New(ipOpts...)
		if err != nil {
			return e.fail(exitUsage, prefix, "--trusted-proxies: %v", err)
		}
		if gw, err = srv.Gateway(u, o.gatewayDomain, ip); err != nil {
			return e.fail(exitFailure, prefix, "%v", err)
		}
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
	if gw != nil {
		gwLis, err = net.Listen("tcp", o.gatewayAddr)
		if err != nil {
			httpLis.Close()
			grpcLis.Close()
			return e.fail(exitFailure, prefix, "--gateway-addr: %v", err)
		}
		// No read or write timeout: the upstream's requests and answers
		// may stream for as long as it likes. Headers and idle
		// connections are bounded.
		gwSrv = &http.Server{Handler: tracing.HTTPHandler(gw, "sluice gateway"), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: server.IdleTimeout}
	}

	g := grpc.NewServer(append(server.GRPCServerOptions(), // what one client may hold (its doc)
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
		// grpc-go's default, 4 MiB, kept and stated: a request carries at
		// most server.MaxDescriptors descriptors of config.MaxDepth
		// entries, checked on the message's bytes before it is decoded,
		// so what a request costs follows its bytes (about twice them);
		// and its values are bytes Envoy copies from the request (a
		// header, the path, up to Envoy's default header limit of 60 KiB
		// each): 64 descriptors of one such value are 3.75 MiB. A lower
		// limit would refuse requests Envoy can send, and Envoy admits a
		// request whose check fails (failure_mode_deny defaults to false).
		// RLQS reports, on the same server, are bounded by their buckets.
		grpc.MaxRecvMsgSize(4<<20),
		tracing.GRPCServerOption(), // OTEL_* environment; none by default
	)...)
	srv.RegisterGRPC(g)
	// Health: the server (""), the RLS service by name and by the name
	// envoyproxy/ratelimit registers, "ratelimit" (an Envoy cluster's
	// grpc_health_check or a probe may ask for it), SERVING until the
	// shutdown begins (hs.Shutdown turns them NOT_SERVING).
	hs := health.NewServer()
	hs.SetServingStatus(rls.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(envoyHealthName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g) // for grpcurl and friends
	hsrv := server.NewHTTPServer(tracing.HTTPHandler(srv.Handler(), "sluice"))

	procsInForce, undoProcs := governProcs(ctx, o.procs)
	defer undoProcs()

	errc := make(chan error, 2)
	if o.rawSockets {
		// Raw reads and writes on the gRPC connections: see internal/rawconn.
		grpcLis = rawconn.Listen(grpcLis)
	}
	go func() { errc <- fmt.Errorf("gRPC: %w", g.Serve(grpcLis)) }()
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
		"grpc", grpcLis.Addr().String(), "grpc_services", "envoy.service.ratelimit.v3.RateLimitService, envoy.service.rate_limit_quota.v3.RateLimitQuotaService, grpc.health.v1.Health, reflection",
		"http", "http://"+httpLis.Addr().String(), "http_paths", strings.Join(httpPaths, ", "),
		"store", storeName(o.storeURL), "config", source, "procs", procsInForce, "replicas", fb.describe, "max_keys", maxKeys)
	if o.onGateway != nil && gwLis != nil {
		o.onGateway(gwLis.Addr().String())
	}
	if o.onListening != nil {
		o.onListening(httpLis.Addr().String(), grpcLis.Addr().String())
	}

	status := exitOK
	var sig os.Signal
	select {
	case <-ctx.Done():
	case sig = <-o.signals:
	case err := <-errc:
		log.Error("server failed; shutting down", "error", err)
		e.fail(exitFailure, prefix, "%v", err)
		status = exitFailure
	}
	// From here /readyz answers 503 and gRPC health NOT_SERVING; every
	// request, RLQS streams included, is still served until the drain.
	srv.SetStopping()
	hs.Shutdown()
	if o.onStopping != nil {
		o.onStopping()
	}
	// The lame duck (SIGTERM only: a human's Ctrl-C does not wait): every
	// request is still served while load balancers and Kubernetes'
	// endpoints learn that this replica is going, so none finds its ports
	// closed.
	if sig == syscall.SIGTERM && o.lameDuck > 0 {
		log.Info("lame duck: /readyz answers 503 while requests are still served", "signal", sig.String(), "for", o.lameDuck)
		after := time.After
		if o.after != nil {
			after = o.after
		}
		select {
		case <-after(o.lameDuck):
		case <-ctx.Done():
		case s2 := <-o.signals:
			log.Warn("second signal: exiting now", "signal", s2.String())
			g.Stop()
			hsrv.Close()
			if gwSrv != nil {
				gwSrv.Close()
			}
			stopWatch()
			<-watchDone
			return exitFailure
		case err := <-errc:
			log.Error("server failed; shutting down", "error", err)
			e.fail(exitFailure, prefix, "%v", err)
			status = exitFailure
		}
	}
	log.Info("shutting down: finishing in-flight requests", "timeout", o.shutdownTimeout)
	// RLQS streams end now (their Envoys reconnect to another replica),
	// and new ones are refused: they never end on their own, so the
	// graceful stop below would wait for them until --shutdown-timeout.
	srv.Drain()
	stopWatch()
	if o.onDraining != nil {
		o.onDraining()
	}

	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	// A second signal while in-flight requests finish cuts it short: the
	// cut-short paths below close what is left at once.
	forced := make(chan struct{})
	drained := make(chan struct{})
	defer close(drained)
	go func() {
		select {
		case s2 := <-o.signals:
			log.Warn("second signal: exiting now, in-flight requests cut off", "signal", s2.String())
			close(forced)
			cancel()
		case <-drained:
		}
	}()
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
	select {
	case <-forced:
		return exitFailure
	default:
	}
	if err := srv.ReleaseLeases(sctx); err != nil { // give other processes what leases held
		log.Warn("returning leases cut short", "error", err)
	}
	log.Info("stopped")
	return status
}

// envoyHealthName is the gRPC health service name envoyproxy/ratelimit
// registers.
const envoyHealthName = "ratelimit"

// usageError is an error in a flag's value (exit status 2).
type usageError struct{ error }

// openServeStore opens the store --store names, a Redis store with extra
// options.
func openServeStore(raw string, timeout time.Duration, maxKeys int, singleSlot string, rawSockets bool, extra ...redisstore.Option) (store sluice.Store, closeFn func() error, err error) {
	switch raw {
	case "memory", "mem://", "memory://":
		s := memstore.New(memstore.WithMaxKeys(maxKeys))
		return s, s.Close, nil
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok || !strings.HasPrefix(scheme, "redis") {
		return nil, nil, usageError{errors.New(withHint(fmt.Sprintf("--store %q: want memory, or a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL", storeName(raw)), storeHint(raw)))}
	}
	opts := append([]redisstore.Option(nil), extra...)
	if timeout > 0 {
		opts = append(opts, redisstore.WithTimeout(timeout))
	}
	if singleSlot != "" {
		opts = append(opts, redisstore.WithSingleSlot(singleSlot))
	}
	if rawSockets {
		opts = append(opts, redisstore.WithConnWrapper(rawconn.Wrap))
	}
	s, err := redisstore.Open(raw, opts...)
	if err != nil {
		return nil, nil, errors.New(withHint(fmt.Sprintf("--store: %v", err), storeHint(raw)))
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
