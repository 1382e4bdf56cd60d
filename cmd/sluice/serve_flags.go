// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/server"
)

// This file holds serve's command line: its usage, its flags and their
// checks. serve.go runs the service they describe.

// httpPaths is what serve answers over HTTP (server.Handler), one route a
// line in its help and joined in its start-up log line (http_paths):
// methods joined by "|", a path as ServeMux has it, and an optional note in
// parentheses. TestHTTPPathsListEveryRoute holds it to the routes the
// server serves (its OpenAPI document, which TestOpenAPIRoutes holds to the
// mux).
var httpPaths = []string{
	"GET / (the live page, and its files)",
	"POST /v1/check",
	"POST /v1/reset",
	"GET /v1/rules",
	"GET /v1/status",
	"POST /v1/simulate",
	"POST /v1/charge",
	"POST /v1/reserve",
	"POST /v1/commit",
	"GET /v1/usage",
	"GET /v1/limits/{domain}",
	"GET|PUT|DELETE /v1/limits/{domain}/{descriptor...}",
	"GET /v1/openapi.json",
	"GET /metrics",
	"GET /healthz",
	"GET /readyz",
	"GET /healthcheck (envoyproxy/ratelimit's)",
	"POST /json (envoyproxy/ratelimit's RLS in JSON)",
}

// serveUsage is serve's help: serveUsageText with httpPaths in place of
// its HTTP_PATHS line.
var serveUsage = strings.Replace(serveUsageText, "HTTP_PATHS\n", "  "+strings.Join(httpPaths, "\n  ")+"\n", 1)

const serveUsageText = `usage: sluice serve [--config DIR] [--store URL] [--http-addr ADDR] [--grpc-addr ADDR]
                    [--max-keys auto|N] [--replicas N] [--redis-single-slot NAME]
                    [--store-timeout D]
                    [--lame-duck D] [--shutdown-timeout D] [--procs auto|N] [--raw-sockets]
                    [--response-headers] [--legacy-headers] [--merge-domains] [--shadow-mode]
                    [--admin-token-file FILE] [--allowed-hosts NAMES]
                    [--upstream URL [--gateway-addr ADDR] [--gateway-domain D] [--trusted-proxies CIDRS]]

Serve runs the rate limit service: Envoy's rate limit service API (RLS v3,
envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit), the gRPC
health service and server reflection (for grpcurl) over gRPC, and over HTTP a JSON API,
Prometheus metrics, health checks and a live page (the version and uptime, the store and its
health, the replica count, the rules, their recent decisions, the keys nearest their limits, RLQS
divisions, and a panel that runs a burst through a rule on a throwaway store):

HTTP_PATHS

HTTP API: described in OpenAPI 3 at GET /v1/openapi.json. POST bodies are
JSON (Content-Type: application/json, else 415); POSTs from another site's
page (Sec-Fetch-Site or Origin) are refused with 403, and so is a browser's
request under a Host that is not an IP address, localhost or a name in
--allowed-hosts (DNS rebinding). A caller's deadline goes in the
Sluice-Timeout header (a duration such
as 50ms, as Envoy's grpc-timeout does for RLS); without one a store call is
bounded by --store-timeout (3s). POST /v1/simulate runs one at a time (503
with Retry-After when busy). The HTTP server cuts off a request not read in
10s and an answer not taken in 15s, and idle connections after 60s.

Per-key limits (rate_limit.overridable: true) are set at runtime with
PUT/GET/DELETE /v1/limits/{domain}/{key}={value}/..., which needs a bearer
token: --admin-token-file FILE (one token per line, or a name, a space and
the token) or SLUICE_ADMIN_TOKEN; without one the limits API answers 403.
On Redis the overrides are kept in Redis (every replica applies them at
once); on memory they last as long as the process. GET /v1/usage?domain=D&key=value
answers a key's use of its limit and when it resets.

Flags:

  --config DIR        a directory of YAML files in the format of Envoy's
                      ratelimit service, with sluice's extensions; watched
                      and reloaded on change (a bad change is logged and the
                      configuration in force stays): 250ms after the last
                      change, and while changes keep coming at least once
                      a second. Default: the built-in example
                      configuration (see 'sluice config check').
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
                      refusing, and so is a limit the request carries
  --admin-token-file FILE  the bearer tokens of the limits API
                      (/v1/limits/...): one per line, a token alone or a
                      name, a space and the token (16 bytes at least); the
                      name is who the change log says made a change.
                      SLUICE_ADMIN_TOKEN adds one more, named env
  --http-addr ADDR    the HTTP listen address (default 127.0.0.1:8080)
  --allowed-hosts NAMES  comma-separated names a browser may reach the HTTP
                      API and live page under, besides IP addresses,
                      localhost and names under .localhost, which are
                      always allowed: sluice.example.com, *.example.com
                      (the names under it), or * (any). A request from a
                      browser (one that sends Origin, Sec-Fetch-* or a
                      Mozilla/ User-Agent) under another Host is refused
                      with 403: a page that points its own name at this
                      address (DNS rebinding) would otherwise be
                      same-origin with the API. Clients that are not
                      browsers (Envoy, Prometheus, probes, curl) send none
                      of those headers and may use any name, such as a
                      Kubernetes service's. Default: none
  --grpc-addr ADDR    the gRPC listen address (default 127.0.0.1:8081)
  --max-keys auto|N   the memory store (and the local fallback store) hold
                      at most N keys, evicting when full: first keys whose
                      state is already idle, then (counted in
                      sluice_store_evictions_total{reason="forced"}) the
                      soonest-idle keys, forgiving what they still owed,
                      which loses exactness for those keys. The default,
                      auto, is 1/4 of the memory (the memory limit of
                      serve's own cgroup, as /proc/self/cgroup names it,
                      or of an ancestor, if set: a systemd MemoryMax=, a
                      container's; else MemAvailable at start) divided
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
                      mode (and counted in sluice_store_errors_total)
                      but is not a Redis error and does not move the
                      circuit breaker; errors and calls that run out of
                      D are, and 5 in a row open the breaker (probed
                      every 200ms). sluice_redis_* in /metrics count each
  --response-headers  RLS answers ask Envoy to add RateLimit-Policy and
                      RateLimit (draft-ietf-httpapi-ratelimit-headers-10)
                      and, on OVER_LIMIT, Retry-After to the response
  --legacy-headers    also X-RateLimit-Limit, -Remaining and -Reset
  --lame-duck D       on SIGTERM, how long serve keeps serving every
                      request while /readyz answers 503 and gRPC health
                      NOT_SERVING, before it stops accepting new work
                      (default 5s; 0: none): long enough for Kubernetes
                      to take the pod out of its Service's endpoints and
                      for health-checking load balancers to notice, so
                      no client finds the ports closed. SIGINT (Ctrl-C)
                      skips it
  --shutdown-timeout D  how long in-flight requests get to finish once
                      serve stops accepting new work: after the lame
                      duck, or at once on SIGINT (default 15s)
  --procs auto|N      run Go code on at most N CPUs at once (GOMAXPROCS).
                      By default Go's own choice (the CPUs, or the
                      container's CPU limit). auto uses as few as the
                      load needs, from one up to that default: it adds
                      CPUs at once when serve's CPU use nears 85% of
                      them, and takes one away after a second in which
                      the use fitted one fewer. It saved CPU per request
                      on a small host shared with the load and Redis; it
                      has not been shown to pay where serve has CPUs of
                      its own, so it is opt-in. A GOMAXPROCS environment
                      variable overrides auto.
  --raw-sockets       read and write the gRPC and Redis connections with
                      raw system calls, which keeps the Go runtime's
                      monitor thread asleep between requests (Linux; off
                      by default: see BENCHMARKS.md for when it pays)

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
                      client IP is the peer address). The upstream gets
                      X-Forwarded-For: a trusted peer's chain with the
                      peer appended, or from another peer the peer alone;
                      X-Real-Ip and the other client-address headers
                      (True-Client-Ip, CF-Connecting-IP, ...) are removed
                      from other peers' requests.
                      Sluice-Priority: critical (the claim on an in-flight
                      rule's critical_reserve) is believed only from a
                      trusted peer, and removed from other peers' requests

Tracing (OpenTelemetry) is off unless the standard environment asks for
it: OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp) turns on
spans for RLS and HTTP calls and for store calls, exported over OTLP
(OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf, the default, or grpc); the
other OTEL_* variables apply as usual.
A leaky-bucket rule is a queue in the library and in gateway mode; over
RLS it is a meter, not a queue: Envoy cannot hold a request for the delay
the rule gives it, so what is admitted passes at once ('sluice config
check' warns of each such rule).
Failure modes (failure_mode in a rule): local, the default, decides with
this replica's share of the limit while the store fails (the fleet stays
available and within a bound: at most about one extra limit, or burst, per
outage shorter than the period; see the sluice package documentation); open
admits; closed refuses.

Logs go to standard error. On SIGTERM, serve answers /readyz 503 while it
still serves for --lame-duck, then stops accepting new requests, lets
in-flight ones finish, and exits 0; on SIGINT it does the same without the
lame duck. A second SIGTERM or SIGINT exits at once (status 1), in-flight
requests cut off. A bad flag exits 2; a
configuration that does not load, a store URL that does not parse or an
address in use exits 1, each problem on one line. A store that does not
answer at start is not fatal: serve logs it and starts, each rule's failure
mode deciding until the store answers, and /readyz stays ready (the failure
modes are the answer; a fleet is not taken out of service together).
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
	lameDuck        time.Duration // --lame-duck: after SIGTERM, before the drain
	reloadDebounce  time.Duration
	procs           int      // GOMAXPROCS if > 0; procsAuto: governed; 0: left alone (the default)
	rawSockets      bool     // --raw-sockets: internal/rawconn on gRPC and Redis connections
	adminTokenFile  string   // --admin-token-file: the limits API's tokens
	allowedHosts    []string // --allowed-hosts: server.WithAllowedHosts
	replicas        int      // --replicas; 0: counted (heartbeats on Redis, 1 on memory)

	// signals delivers SIGTERM and SIGINT (runServe's signal.Notify); nil:
	// none, the end of serve's context alone stops it (as SIGINT does).
	signals <-chan os.Signal

	// For tests: called once both listeners are up, when shutdown begins
	// (/readyz fails), and when the lame duck ends and the drain begins;
	// after, when set, replaces time.After for the lame duck.
	onListening func(httpAddr, grpcAddr string)
	onStopping  func()
	onDraining  func()
	onGateway   func(addr string)
	after       func(time.Duration) <-chan time.Time
}

// DefaultLameDuck is --lame-duck's default. Kubernetes takes a terminating
// pod out of its Service's endpoints when the deletion begins, whatever its
// readiness, but kube-proxy, cluster DNS and a mesh's Envoys learn it a
// moment later: a few seconds in the usual cluster. A pod that closes its
// ports at SIGTERM refuses the connections sent to it meanwhile, and Envoy
// lets through unlimited every request whose check fails (failure_mode_deny
// defaults to false). 5s covers that, and with the default
// --shutdown-timeout (15s) ends well within Kubernetes' default grace period
// (30s) with no preStop hook (the image has no shell to run one).
const DefaultLameDuck = 5 * time.Second

func runServe(e env, args []string) int {
	const prefix = "sluice serve"
	fset := flag.NewFlagSet(prefix, flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	fset.Usage = func() {}
	o := serveOptions{reloadDebounce: server.DefaultReloadDebounce}
	fset.StringVar(&o.configDir, "config", "", "")
	fset.StringVar(&o.storeURL, "store", "memory", "")
	fset.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:8080", "")
	fset.StringVar(&o.grpcAddr, "grpc-addr", "127.0.0.1:8081", "")
	fset.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 15*time.Second, "")
	fset.DurationVar(&o.lameDuck, "lame-duck", DefaultLameDuck, "")
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
	procsFlag := fset.String("procs", "", "")
	fset.BoolVar(&o.rawSockets, "raw-sockets", false, "")
	fset.StringVar(&o.adminTokenFile, "admin-token-file", "", "")
	allowedHosts := fset.String("allowed-hosts", "", "")
	err := fset.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		io.WriteString(e.stdout, serveUsage)
		return exitOK
	}
	if err != nil {
		return e.fail(exitUsage, prefix, "%v (run 'sluice help serve' for usage)", err)
	}
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
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
	if set["allowed-hosts"] {
		hosts, err := server.ParseAllowedHosts(*allowedHosts)
		if err != nil {
			return e.fail(exitUsage, prefix, "--allowed-hosts: %v", err)
		}
		o.allowedHosts = hosts
	}
	if o.replicas < 0 {
		return e.fail(exitUsage, prefix, "--replicas %d: must not be negative", o.replicas)
	}
	if o.storeTimeout < 0 {
		return e.fail(exitUsage, prefix, "--store-timeout %v: must not be negative", o.storeTimeout)
	}
	if o.upstream == "" {
		for _, name := range []string{"gateway-addr", "gateway-domain", "trusted-proxies"} {
			if set[name] {
				return e.fail(exitUsage, prefix, "--%s: needs --upstream (gateway mode)", name)
			}
		}
	}
	if o.upstream != "" {
		u, err := url.Parse(o.upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return e.fail(exitUsage, prefix, "--upstream %q: want an http:// or https:// URL with a host", o.upstream)
		}
	}
	for _, a := range []struct{ name, addr string }{{"http-addr", o.httpAddr}, {"grpc-addr", o.grpcAddr}, {"gateway-addr", o.gatewayAddr}} {
		if err := checkListenAddr(a.name, a.addr); err != nil {
			return e.fail(exitUsage, prefix, "%v", err)
		}
	}
	if o.shutdownTimeout <= 0 {
		return e.fail(exitUsage, prefix, "--shutdown-timeout %v: must be positive", o.shutdownTimeout)
	}
	if o.lameDuck < 0 {
		return e.fail(exitUsage, prefix, "--lame-duck %v: must not be negative (0: none)", o.lameDuck)
	}
	switch *procsFlag {
	case "": // Go's default
	case "auto":
		o.procs = procsAuto
	default:
		n, err := strconv.Atoi(*procsFlag)
		if err != nil || n < 1 {
			return e.fail(exitUsage, prefix, "--procs %q: want auto or a whole number of at least 1", *procsFlag)
		}
		o.procs = n
	}
	// Two a buffer: the one that stops serve, and a second one that cuts
	// the shutdown short.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	o.signals = sigs
	return serve(context.Background(), e, o)
}

// maxKeysNone is serveOptions.maxKeys for --max-keys 0: no bound.
const maxKeysNone = -1

// procsAuto is serveOptions.procs for --procs auto.
const procsAuto = -1
