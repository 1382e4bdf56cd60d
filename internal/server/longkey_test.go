// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

const longYAML = `domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: bot
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// wantDigest is the digest form of the verbatim key of one entry, written
// out here rather than with storeKey: it is the layout every process
// sharing a Redis must agree on.
func wantDigest(key, value string) string {
	verbatim := strconv.Itoa(len(key)) + ":" + key + strconv.Itoa(len(value)) + ":" + value
	sum := sha256.Sum256([]byte(verbatim))
	return "#" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// peekKey returns what the harness's store holds under key for the rule that
// entries match (a cost-0 take: it changes nothing).
func (h *harness) peekKey(t *testing.T, domain string, entries []config.Entry, key string) sluice.Decision {
	t.Helper()
	r := h.srv.snap.Load().cfg.Match(domain, entries)
	if r == nil {
		t.Fatalf("no rule matches %v", entries)
	}
	d, err := h.srv.store.Take(context.Background(), r.Policy, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestLongValueKeys: a descriptor whose value is 60 KB is decided, counted
// and reset under its 44-byte digest key exactly as a short one is under
// its verbatim key, over RLS and the JSON API alike, and in shadow mode; two
// values that differ only past the bound are two keys; the store holds
// one key of digestKeyLen bytes per descriptor.
func TestLongValueKeys(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": longYAML})
	prefix := strings.Repeat("v", 60<<10)
	long1, long2 := prefix+"1", prefix+"2" // equal up to their last byte
	user1 := []config.Entry{{Key: "user", Value: long1}}
	key1, key2 := wantDigest("user", long1), wantDigest("user", long2)
	if len(key1) != digestKeyLen || key1 == key2 {
		t.Fatalf("digest keys %q and %q", key1, key2)
	}

	for i, want := range []string{"OK: OK", "OK: OK", "OVER: OVER"} {
		if got := codesOf(h.should(t, "api", desc("user", long1))); got != want {
			t.Errorf("RLS request %d with the long value: %s, want %s", i, got, want)
		}
	}
	if got := codesOf(h.should(t, "api", desc("user", long2))); got != "OK: OK" {
		t.Errorf("another long value, equal for 60 KB: %s, want OK (its own key)", got)
	}
	// The JSON API decides on the same key.
	body, _ := json.Marshal(CheckRequest{Domain: "api", Descriptors: []JSONDescriptor{{Entries: user1}}})
	code, s := h.post(t, "/v1/check", string(body))
	if code != 200 || !strings.Contains(s, `"overall_code":"OVER_LIMIT"`) {
		t.Errorf("/v1/check with the long value after two RLS hits: %d %s", code, s)
	}

	// The store holds the state under the digest keys, and nothing else.
	if d := h.peekKey(t, "api", user1, key1); d.Remaining != 0 {
		t.Errorf("digest key of long1: remaining %d, want 0", d.Remaining)
	}
	if d := h.peekKey(t, "api", user1, key2); d.Remaining != 1 {
		t.Errorf("digest key of long2: remaining %d, want 1", d.Remaining)
	}
	if n := h.srv.base.(*memstore.Store).Len(); n != 2 {
		t.Errorf("store holds %d keys, want 2", n)
	}

	// Reset the long descriptor: its budget is back, the other's is not.
	body, _ = json.Marshal(ResetRequest{Domain: "api", Entries: user1})
	if code, s := h.post(t, "/v1/reset", string(body)); code != 200 || !strings.Contains(s, `"reset":"api.user"`) {
		t.Fatalf("reset: %d %s", code, s)
	}
	if d := h.peekKey(t, "api", user1, key1); d.Remaining != 2 {
		t.Errorf("after reset: remaining %d, want 2", d.Remaining)
	}
	if got := codesOf(h.should(t, "api", desc("user", long1))); got != "OK: OK" {
		t.Errorf("after reset: %s, want OK", got)
	}
	if d := h.peekKey(t, "api", user1, key2); d.Remaining != 1 {
		t.Errorf("long2 after long1's reset: remaining %d, want 1 (not reset)", d.Remaining)
	}

	// Shadow mode counts under the digest key too.
	bot := []config.Entry{{Key: "bot", Value: long1}}
	for range 2 {
		h.should(t, "api", desc("bot", long1))
	}
	if d := h.peekKey(t, "api", bot, wantDigest("bot", long1)); d.Remaining != 0 {
		t.Errorf("shadow rule's digest key: remaining %d, want 0", d.Remaining)
	}
	if b := ruleNamed(t, h.rules(t), "api.bot"); b.ShadowRefused != 1 {
		t.Errorf("shadow rule would have refused %d, want 1", b.ShadowRefused)
	}
	if n := h.srv.base.(*memstore.Store).Len(); n != 3 {
		t.Errorf("store holds %d keys, want 3", n)
	}
}

// TestStoreKeyForm: keys up to maxStoreKey bytes are verbatim and as they
// always were; longer ones are the digest form, which no verbatim key can
// be, and differ when the descriptors differ anywhere.
func TestStoreKeyForm(t *testing.T) {
	entry := func(v string) []config.Entry { return []config.Entry{{Key: "user", Value: v}} }
	if got := storeKey(nil, entry("ann")); got != "4:user3:ann" {
		t.Errorf("short key %q, want 4:user3:ann", got)
	}
	// "4:user" and "NN:" are 9 bytes: a value of maxStoreKey−9 bytes makes a
	// key of exactly maxStoreKey.
	edge := strings.Repeat("x", maxStoreKey-9)
	if got := storeKey(nil, entry(edge)); got != "4:user"+strconv.Itoa(len(edge))+":"+edge || len(got) != maxStoreKey {
		t.Errorf("key of %d bytes is not verbatim: %q", maxStoreKey, got)
	}
	if got, want := storeKey(nil, entry(edge+"x")), wantDigest("user", edge+"x"); got != want {
		t.Errorf("key of %d bytes: %q, want %q", maxStoreKey+1, got, want)
	}
	// Past digestChunk, the hash is written in chunks: the same digest.
	for _, n := range []int{digestChunk - 20, digestChunk, digestChunk + 1, 3*digestChunk + 7, 3 << 20} {
		v := strings.Repeat("é", n/2) + strings.Repeat("z", n%2)
		if got, want := storeKey(nil, entry(v)), wantDigest("user", v); got != want {
			t.Errorf("value of %d bytes: %q, want %q", n, got, want)
		}
	}
	// Two descriptors that differ only past the bound; and a long key (not
	// value) is hashed whole too.
	a := []config.Entry{{Key: "route", Value: strings.Repeat("/v1", 40)}, {Key: "user", Value: "a"}}
	b := []config.Entry{{Key: "route", Value: strings.Repeat("/v1", 40)}, {Key: "user", Value: "b"}}
	ka, kb := storeKey(nil, a), storeKey(nil, b)
	if ka == kb || len(ka) != digestKeyLen || len(kb) != digestKeyLen || ka[0] != digestMark {
		t.Errorf("keys %q and %q", ka, kb)
	}
	// Moving bytes from one entry to the next changes the key: the digest
	// is of the length-prefixed form.
	c := []config.Entry{{Key: "route", Value: strings.Repeat("/v1", 40) + "1:userx"}, {Key: "user", Value: ""}}
	if storeKey(nil, c) == ka {
		t.Error("entries that join to the same text share a key")
	}
}

// TestStoreKeyAllocs: a short key costs what it cost before digests (one
// allocation, the key); a long one costs one too, however long.
func TestStoreKeyAllocs(t *testing.T) {
	for _, v := range []string{"u123", strings.Repeat("x", 60<<10)} {
		entries := []config.Entry{{Key: "user", Value: v}}
		if n := testing.AllocsPerRun(100, func() { storeKey(nil, entries) }); n != 1 {
			t.Errorf("value of %d bytes: %v allocations, want 1", len(v), n)
		}
	}
}

// TestGatewayLongHeaderKey: the gateway keys a long header value by the
// same digest an RLS request with that value uses, so both share a limit
// (httplimit.Header's own hashing of values past httplimit.MaxKeyLen would
// make it another key).
func TestGatewayLongHeaderKey(t *testing.T) {
	h := start(t, map[string]string{"gateway.yaml": gatewayYAML})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	ip, err := clientip.New()
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(mustGateway(t, h.srv, u, GatewayDomain, ip))
	defer gw.Close()
	apiKey := strings.Repeat("k", 8<<10)
	req, _ := http.NewRequest("POST", gw.URL+"/v1/quotes", nil)
	req.Header.Set("X-Api-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("quote with a long API key: %s", resp.Status)
	}
	r := h.peek(t, "gateway", desc("route", "POST /v1/quotes", "header:X-Api-Key", apiKey))
	if got := r.Statuses[0].LimitRemaining; got != 1 {
		t.Errorf("RLS sees remaining %d after one gateway request, want 1", got)
	}
	if got := codesOf(h.should(t, "gateway", desc("route", "POST /v1/quotes", "header:X-Api-Key", apiKey))); got != "OK: OK" {
		t.Errorf("RLS request: %s", got)
	}
	req, _ = http.NewRequest("POST", gw.URL+"/v1/quotes", nil)
	req.Header.Set("X-Api-Key", apiKey)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("third request, the gateway after RLS: %s, want 429", resp.Status)
	}
}
