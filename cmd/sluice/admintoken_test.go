// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeAdminToken: --admin-token-file and SLUICE_ADMIN_TOKEN turn the
// limits API on; a change is logged with the token's name; a request
// without a token is refused.
func TestServeAdminToken(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "api.yaml"), []byte("domain: api\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 2, overridable: true}\n"), 0o644)
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("ops 0123456789abcdef-ops\n"), 0o600)
	t.Setenv("SLUICE_ADMIN_TOKEN", "0123456789abcdef-env")
	r := startServe(t, serveOptions{configDir: dir, adminTokenFile: tokens})
	put := func(token string) int {
		req, _ := http.NewRequest("PUT", "http://"+r.httpAddr+"/v1/limits/api/tenant=acme", bytes.NewBufferString(`{"requests_per_unit":9}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		token string
		code  int
	}{{"", 401}, {"0123456789abcdef-nope", 401}, {"0123456789abcdef-ops", 200}, {"0123456789abcdef-env", 200}} {
		if got := put(c.token); got != c.code {
			t.Errorf("token %q: %d, want %d", c.token, got, c.code)
		}
	}
	log := r.stderr.String()
	for _, want := range []string{`msg="limit override changed" who=ops`, `msg="limit override changed" who=env`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
}

func TestServeAdminTokenFileMissing(t *testing.T) {
	var stderr bytes.Buffer
	code := runServe(env{stdout: io.Discard, stderr: &stderr}, []string{"--admin-token-file", filepath.Join(t.TempDir(), "none"), "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"})
	if code != exitUsage || !strings.HasPrefix(stderr.String(), "sluice serve: admin token file: open ") {
		t.Errorf("exit %d, %q", code, stderr.String())
	}
}
