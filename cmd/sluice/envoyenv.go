// SPDX-License-Identifier: Apache-2.0

package main

import "strings"

// envoySettings are envoyproxy/ratelimit's environment variables and what
// takes the place of each in sluice serve, which reads flags only. A user
// who swaps the image of an envoyproxy/ratelimit deployment keeps its
// environment; serve warns of every one it sees (envoyEnvironment) instead
// of serving silently from its defaults (memory, with REDIS_URL set: each
// replica counting alone).
//
// generic marks names other programs set too (PORT, by Cloud Run and
// Heroku; LOG_LEVEL): they are named only beside a variable that is
// envoyproxy/ratelimit's alone.
var envoySettings = []struct {
	name, instead string
	generic       bool
}{
	{name: "BACKEND_TYPE", instead: "--store"},
	{name: "REDIS_URL", instead: "--store"},
	{name: "REDIS_TYPE", instead: "--store"},
	{name: "REDIS_SOCKET_TYPE", instead: "--store"},
	{name: "REDIS_AUTH", instead: "--store"},
	{name: "REDIS_TLS", instead: "--store rediss://"},
	{name: "REDIS_TLS_CLIENT_CERT", instead: "--store rediss://"},
	{name: "REDIS_TLS_CLIENT_KEY", instead: "--store rediss://"},
	{name: "REDIS_TLS_CACERT", instead: "--store rediss://"},
	{name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", instead: "--store rediss://"},
	{name: "REDIS_POOL_SIZE", instead: "--store"},
	{name: "REDIS_PIPELINE_WINDOW", instead: "--store"},
	{name: "REDIS_PIPELINE_LIMIT", instead: "--store"},
	{name: "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", instead: "--store"},
	{name: "REDIS_PERSECOND", instead: "--store (one store for every rule)"},
	{name: "REDIS_PERSECOND_URL", instead: "--store (one store for every rule)"},
	{name: "REDIS_PERSECOND_TYPE", instead: "--store (one store for every rule)"},
	{name: "REDIS_PERSECOND_SOCKET_TYPE", instead: "--store (one store for every rule)"},
	{name: "REDIS_PERSECOND_AUTH", instead: "--store (one store for every rule)"},
	{name: "REDIS_PERSECOND_TLS", instead: "--store (one store for every rule)"},
	{name: "REDIS_PERSECOND_POOL_SIZE", instead: "--store (one store for every rule)"},
	{name: "MEMCACHE_HOST_PORT", instead: "--store (memory or Redis; no memcache)"},
	{name: "MEMCACHE_SRV", instead: "--store (memory or Redis; no memcache)"},
	{name: "RUNTIME_ROOT", instead: "--config"},
	{name: "RUNTIME_SUBDIRECTORY", instead: "--config"},
	{name: "RUNTIME_APPDIRECTORY", instead: "--config"},
	{name: "RUNTIME_WATCH_ROOT", instead: "--config"},
	{name: "RUNTIME_IGNOREDOTFILES", instead: "--config"},
	{name: "CONFIG_TYPE", instead: "--config (files only)"},
	{name: "FORCE_START_WITHOUT_INITIAL_CONFIG", instead: "--config (files only)"},
	{name: "MERGE_DOMAIN_CONFIG", instead: "--merge-domains"},
	{name: "SHADOW_MODE", instead: "--shadow-mode"},
	{name: "LIMIT_RESPONSE_HEADERS_ENABLED", instead: "--response-headers"},
	{name: "LIMIT_LIMIT_HEADER", instead: "--legacy-headers"},
	{name: "LIMIT_REMAINING_HEADER", instead: "--legacy-headers"},
	{name: "LIMIT_RESET_HEADER", instead: "--legacy-headers"},
	{name: "GRPC_HOST", instead: "--grpc-addr"},
	{name: "GRPC_PORT", instead: "--grpc-addr"},
	{name: "USE_STATSD", instead: "GET /metrics (Prometheus)"},
	{name: "STATSD_HOST", instead: "GET /metrics (Prometheus)"},
	{name: "STATSD_PORT", instead: "GET /metrics (Prometheus)"},
	{name: "USE_DOG_STATSD", instead: "GET /metrics (Prometheus)"},
	{name: "USE_PROMETHEUS", instead: "GET /metrics (Prometheus)"},
	{name: "PROMETHEUS_ADDR", instead: "GET /metrics (Prometheus)"},
	{name: "LOCAL_CACHE_SIZE_IN_BYTES", instead: "rate_limit.lease"},
	{name: "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", instead: "no setting: always on"},
	{name: "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", instead: "no setting: always"},
	{name: "NEAR_LIMIT_RATIO", instead: "no setting"},
	{name: "EXPIRATION_JITTER_MAX_SECONDS", instead: "no setting"},
	{name: "CACHE_KEY_PREFIX", instead: "no setting: Redis keys start sluice:"},
	{name: "TRACING_ENABLED", instead: "OTEL_EXPORTER_OTLP_ENDPOINT"},
	{name: "HOST", instead: "--http-addr", generic: true},
	{name: "PORT", instead: "--http-addr", generic: true},
	{name: "LOG_LEVEL", instead: "no setting", generic: true},
	{name: "LOG_FORMAT", instead: "no setting", generic: true},
}

// envoyEnvironment returns the variables of envoySettings that getenv
// finds set, each followed by what takes its place, for one log line; nil
// when none of envoyproxy/ratelimit's own is set. It never returns a
// value: REDIS_AUTH and REDIS_URL may hold a password. A *_PORT that holds
// a Kubernetes service link ("tcp://10.0.0.7:8125", which Kubernetes sets
// for a service named statsd or grpc) is not envoyproxy/ratelimit's.
func envoyEnvironment(getenv func(string) string) []any {
	var attrs []any
	own := false
	for _, s := range envoySettings {
		v := getenv(s.name)
		if v == "" || strings.HasSuffix(s.name, "_PORT") && strings.Contains(v, "://") {
			continue
		}
		attrs = append(attrs, s.name, s.instead)
		own = own || !s.generic
	}
	if !own {
		return nil
	}
	return attrs
}
