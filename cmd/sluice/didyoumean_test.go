// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// The common mistakes get the value meant, on one line, with exit 2.
func TestDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--store", "localhost:6379"}, `sluice serve: --store "localhost:6379": want memory, or a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL (did you mean redis://localhost:6379?)`},
		{[]string{"serve", "--store", "redis"}, `(did you mean redis://redis:6379?)`},
		{[]string{"replay", "--algorithm", "gcra", "--limit", "1", "--period", "1s", "--store", "127.0.0.1:6379"}, `sluice replay: --store "127.0.0.1:6379": unknown store (want memory, mem://, memory:// or a redis:// URL) (did you mean redis://127.0.0.1:6379?)`},
		{[]string{"serve", "--http-addr", "18193"}, `sluice serve: --http-addr "18193": want HOST:PORT (did you mean :18193, every interface, or 127.0.0.1:18193, this machine only?)`},
		{[]string{"serve", "--grpc-addr", "localhost"}, `sluice serve: --grpc-addr "localhost": want HOST:PORT, like 127.0.0.1:8080 or :8080`},
	} {
		code, out, errOut := runSluice(t, "", c.args...)
		if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want exit 2 and a line containing %q", c.args, code, out, errOut, c.want)
		}
	}
	// A scheme redisstore refuses (exit 1, as other bad Redis URLs).
	code, _, errOut := runSluice(t, "", "serve", "--store", "redis-cluster://a:7000")
	if code != exitFailure || !strings.HasSuffix(errOut, "(did you mean redis+cluster://a:7000?)\n") {
		t.Errorf("redis-cluster://: code %d, stderr %q, want a hint of redis+cluster://", code, errOut)
	}
	// No hint where none fits, and never an echoed password.
	for _, raw := range []string{"etcd://x", "me:hunter2@cache:6379", "memroy", ""} {
		if h := storeHint(raw); h != "" {
			t.Errorf("storeHint(%q) = %q, want none", raw, h)
		}
	}
}
