// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestConfigCheckMergeDomains: one domain across files loads only with
// --merge-domains, and a top-level descriptor two files define is refused
// even then.
func TestConfigCheckMergeDomains(t *testing.T) {
	const dir = "../../internal/config/testdata/merge"
	code, out, errOut := runSluice(t, "", "config", "check", dir)
	if code != exitFailure || out != "" || !strings.Contains(errOut, `domain: "test-domain" is already defined in`) {
		t.Errorf("without the flag: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runSluice(t, "", "config", "check", "--merge-domains", dir)
	if code != exitOK || errOut != "" || out != dir+": ok: 2 files, 1 domain, 3 rules (test-domain)\n" {
		t.Errorf("with the flag: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runSluice(t, "", "config", "check", "--merge-domains", "../../internal/config/testdata/merge-dup")
	if code != exitFailure || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "merge-dup/b.yaml:6: descriptors[1]: duplicate descriptor") {
		t.Errorf("duplicate: code %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runSluice(t, "", "config", "check", "--merge", dir); code != exitUsage || strings.Count(errOut, "\n") != 1 {
		t.Errorf("bad flag: code %d, stderr %q", code, errOut)
	}
}

// TestServeMergeDomainsAndShadowMode: serve loads a merged domain with
// mergeDomains (--merge-domains) and answers OK past the limit with
// shadowMode (--shadow-mode); without mergeDomains the directory does not
// load.
func TestServeMergeDomainsAndShadowMode(t *testing.T) {
	const dir = "../../internal/config/testdata/merge"
	var stderr bytes.Buffer
	if code := serve(context.Background(), env{stdout: &bytes.Buffer{}, stderr: &stderr}, serveOptions{configDir: dir, storeURL: "memory", httpAddr: "127.0.0.1:0", grpcAddr: "127.0.0.1:0"}); code != exitFailure || !strings.Contains(stderr.String(), "already defined in") {
		t.Errorf("without merging: exit %d, %s", code, stderr.String())
	}
	r := startServe(t, serveOptions{configDir: dir, mergeDomains: true, shadowMode: true})
	client, _ := rlsClient(t, r.grpcAddr)
	for i := range 12 { // key1_value1 allows 10 a minute
		resp, err := client.ShouldRateLimit(context.Background(), rlsRequest("test-domain", "key1", "value1"))
		if err != nil || resp.OverallCode != rls.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 10 {
			t.Fatalf("request %d: %v %v", i, resp, err)
		}
	}
	resp, err := client.ShouldRateLimit(context.Background(), rlsRequest("test-domain", "key2", "value2"))
	if err != nil || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 20 {
		t.Errorf("the other file's descriptor: %v %v", resp, err)
	}
}
