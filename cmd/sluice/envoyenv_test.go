// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestServeWarnsOfEnvoyEnvironment: the user swaps the image of an
// envoyproxy/ratelimit Deployment for sluice's and keeps its environment
// (BACKEND_TYPE=redis, REDIS_URL=redis:6379, RUNTIME_ROOT, ...). The
// README's table maps each of these settings to a flag; sluice read none of
// them and said nothing, so it served from its default store, memory: each
// replica counting alone, a fleet of N admitting N times every limit. Serve
// now logs one warning at start naming each variable and what takes its
// place, never its value (REDIS_URL may hold a password), and still reads
// only its flags.
func TestServeWarnsOfEnvoyEnvironment(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://:secret@redis:6379")
	t.Setenv("BACKEND_TYPE", "redis")
	t.Setenv("RUNTIME_ROOT", "/srv/runtime_data/current")
	r := startServe(t, serveOptions{})
	r.stop(t)
	log := r.stderr.String()
	var warnings []string
	for l := range strings.SplitSeq(log, "\n") {
		if strings.Contains(l, "envoyproxy/ratelimit's environment") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%d warnings of envoyproxy/ratelimit's environment, want 1; log:\n%s", len(warnings), log)
	}
	for _, want := range []string{"level=WARN", "BACKEND_TYPE=--store", "REDIS_URL=--store", "RUNTIME_ROOT=--config"} {
		if !strings.Contains(warnings[0], want) {
			t.Errorf("the warning lacks %s: %s", want, warnings[0])
		}
	}
	if strings.Contains(log, "secret") {
		t.Errorf("the log shows REDIS_URL's value:\n%s", log)
	}
	if !strings.Contains(log, "store=memory") {
		t.Errorf("serve did not serve from its flags (--store memory):\n%s", log)
	}
}

// TestEnvoyEnvironment: which variables envoyEnvironment names: those of
// envoyproxy/ratelimit that are set; names other programs set too (PORT,
// LOG_LEVEL) only beside one of its own; a Kubernetes service link in a
// *_PORT (a service named statsd sets STATSD_PORT=tcp://...) never.
func TestEnvoyEnvironment(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "[]"},
		{map[string]string{"PORT": "8080", "LOG_LEVEL": "debug", "HOME": "/root"}, "[]"},
		{map[string]string{"STATSD_PORT": "tcp://10.0.0.7:8125", "GRPC_PORT": "tcp://10.0.0.8:81"}, "[]"},
		{map[string]string{"USE_STATSD": "false", "PORT": "8080", "REDIS_SOCKET_TYPE": "tcp", "STATSD_PORT": "tcp://10.0.0.7:8125"},
			"[REDIS_SOCKET_TYPE --store USE_STATSD GET /metrics (Prometheus) PORT --http-addr]"},
		{map[string]string{"SHADOW_MODE": "true", "MERGE_DOMAIN_CONFIG": "", "GRPC_PORT": "8081"},
			"[SHADOW_MODE --shadow-mode GRPC_PORT --grpc-addr]"},
	} {
		got := fmt.Sprint(envoyEnvironment(func(k string) string { return tc.env[k] }))
		if got != tc.want {
			t.Errorf("%v: %s, want %s", tc.env, got, tc.want)
		}
	}
}
