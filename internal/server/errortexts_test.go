// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestErrorTextsNameTheField: a 400 names the field that is wrong where the
// caller wrote it. A top-level hits_addend below 0 was reported as the
// first descriptor's ("descriptors[0]: hits_addend -2"), and a limit the
// limits API refused named an empty policy (`policy "": burst 10`) rather
// than the rule the limit was for.
func TestErrorTextsNameTheField(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": tenantsYAML(), "rides.yaml": ridesYAML}, WithAdminTokens(AdminToken{Name: "ops", Token: testToken}))
	for _, c := range []struct {
		method, path, token, body, want string
	}{
		{"POST", "/v1/check", "-", `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"x"}]}],"hits_addend":-2}`,
			"hits_addend -2: must be >= 0"},
		{"POST", "/v1/charge", "-", `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"x"}]},{"entries":[{"key":"city","value":"y"}]}],"hits_addend":-2}`,
			"hits_addend -2: must be >= 0"},
		// A descriptor's own cost is still named by its index.
		{"POST", "/v1/check", "-", `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"x"}]},{"entries":[{"key":"city","value":"y"}],"hits_addend":-1}]}`,
			"descriptors[1]: hits_addend -1: must be >= 0"},
		{"PUT", "/v1/limits/api/alg=fixed-window/tenant=acme", testToken, `{"requests_per_unit":5,"burst":10}`,
			"body: limit for rule api.alg_fixed-window.tenant: burst 10: fixed-window has no burst (leave it 0)"},
		{"PUT", "/v1/limits/api/alg=gcra/tenant=acme", testToken, `{"requests_per_unit":5,"period":"1h","burst":-1}`,
			"body: limit for rule api.alg_gcra.tenant: burst -1: must be between 1 and"},
	} {
		code, body := h.do(t, c.method, c.path, c.token, c.body)
		var e struct{ Error string }
		json.Unmarshal([]byte(body), &e)
		if code != http.StatusBadRequest || len(e.Error) < len(c.want) || e.Error[:len(c.want)] != c.want {
			t.Errorf("%s %s %s: %d %s; want 400 starting %q", c.method, c.path, c.body, code, body, c.want)
		}
	}
}

// TestJSONTypeErrorsNameTheValue: a JSON body with a value of the wrong type
// (a number where the API takes a string, a string where it takes an
// integer) was answered in Go's words, "json: cannot unmarshal number into
// Go struct field CheckRequest.descriptors.entries.value of type string",
// naming neither the descriptor's index nor the value (outside review 18),
// and /json in protobuf's, "invalid value for uint64 field value" for a
// descriptor's hitsAddend. Every JSON body the API decodes now names the
// value where the client wrote it, the value, and what the field takes.
func TestJSONTypeErrorsNameTheValue(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": tenantsYAML(), "rides.yaml": ridesYAML}, WithAdminTokens(AdminToken{Name: "ops", Token: testToken}))
	two := `{"domain":"api","descriptors":[{"entries":[{"key":"fixed","value":"a"}]},{"entries":[{"key":"fixed","value":7777}]}]}`
	for _, c := range []struct {
		method, path, token, body, want string
	}{
		{"POST", "/v1/check", "-", two, "descriptors[1].entries[0].value: 7777: want a string"},
		{"POST", "/v1/check", "-", `{"domain":"api","descriptors":{"entries":[]}}`, "descriptors: an object: want an array"},
		{"POST", "/v1/check", "-", `{"domain":"api","descriptors":["x"]}`, `descriptors[0]: "x": want an object`},
		{"POST", "/v1/check", "-", `{"domain":"api","descriptors":[{"entries":[]}],"hits_addend":1.5}`, "hits_addend: 1.5: want an integer"},
		{"POST", "/v1/check", "-", `[]`, "body: an array: want an object"},
		// Keys are matched regardless of case, as encoding/json does; the
		// client's spelling is kept.
		{"POST", "/v1/charge", "-", `{"domain":"api","descriptors":[{"entries":[],"Hits_Addend":"2"}]}`, `descriptors[0].Hits_Addend: "2": want an integer`},
		{"POST", "/v1/reserve", "-", `{"domain":5,"descriptors":[{"entries":[]}]}`, "domain: 5: want a string"},
		{"POST", "/v1/reset", "-", `{"domain":"api","entries":[{"key":5}]}`, "entries[0].key: 5: want a string"},
		{"POST", "/v1/commit", "-", `{"reservation_id":4242,"hits_addend":1}`, "reservation_id: 4242: want a string"},
		{"PUT", "/v1/limits/api/alg=gcra/tenant=acme", testToken, `{"requests_per_unit":"5000","unit":"minute"}`, `requests_per_unit: "5000": want an integer`},
		{"PUT", "/v1/limits/api/alg=gcra/tenant=acme", testToken, `{"requests_per_unit":"` + strings.Repeat("y", 100) + `"}`, `requests_per_unit: "` + strings.Repeat("y", 64) + `…(cut from 100 bytes)": want an integer`},
		{"POST", "/v1/simulate", "-", `{"algorithm":"gcra","limit":99999999999999999999,"period":"1s","pattern":"burst 3"}`, "limit: 99999999999999999999: want an integer from -9223372036854775808 to 9223372036854775807"},
		// /json, decoded by protojson, names them alike.
		{"POST", "/json", "-", two, "descriptors[1].entries[0].value: 7777: want a string"},
		{"POST", "/json", "-", `{"domain":"api","hitsAddend":-1,"descriptors":[{"entries":[]}]}`, "hitsAddend: -1: want an integer from 0 to 4294967295"},
		{"POST", "/json", "-", `{"domain":"api","descriptors":[{"entries":[],"hits_addend":"x"}]}`, `descriptors[0].hits_addend: "x": want an integer from 0 to 18446744073709551615`},
		{"POST", "/json", "-", `{"domain":"api","descriptors":[{"entries":[],"limit":{"unit":"FORTNIGHT"}}]}`, `descriptors[0].limit.unit: "FORTNIGHT": want one of UNKNOWN, SECOND, MINUTE, HOUR, DAY, MONTH, YEAR`},
	} {
		code, body := h.do(t, c.method, c.path, c.token, c.body)
		var e struct{ Error string }
		json.Unmarshal([]byte(body), &e)
		if code != http.StatusBadRequest || e.Error != c.want {
			t.Errorf("%s %s %.100s: %d %s; want 400 %q", c.method, c.path, c.body, code, body, c.want)
		}
	}
	// A value the body does not hold (an error of a decoder of its own)
	// is named by its field's names.
	e := &json.UnmarshalTypeError{Value: "number", Type: reflect.TypeFor[string](), Field: "a.b"}
	if got, want := typeErrorText([]byte(`{}`), e), "a.b: a number: want a string"; got != want {
		t.Errorf("typeErrorText of a value not in the body: %q; want %q", got, want)
	}
}

// FuzzJSONErrorTexts: whatever the body, decoding it into each request of
// the API answers without a panic and names no Go type; protoErrorText
// finds nothing wrong in a body protojson takes (its checks are no stricter
// than protojson's, so that the value it names in a refused body is one
// protojson refuses).
func FuzzJSONErrorTexts(f *testing.F) {
	for _, s := range []string{
		`{"domain":"api","descriptors":[{"entries":[{"key":"fixed","value":"a"}]},{"entries":[{"key":"fixed","value":7777}]}]}`,
		`{"domain":"api","descriptors":[{"entries":[],"hitsAddend":"7","limit":{"requestsPerUnit":"5","unit":"MINUTE"}}],"hits_addend":1e2}`,
		`{"reservation_id":4242,"hits_addend":1}`, `{"requests_per_unit":"5000","unit":"minute"}`,
		`[]`, `{"descriptors":{}}`, `{"entries":[{"key":null}]}`, `{"a":{"b":[1,{"c":[]}]}}`, `"x"`, `nul`,
	} {
		f.Add([]byte(s))
	}
	md := (&rls.RateLimitRequest{}).ProtoReflect().Descriptor()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range []any{new(CheckRequest), new(ResetRequest), new(CommitRequest), new(LimitSpec), new(SimulateRequest)} {
			if msg := decodeBody(b, v); strings.Contains(msg, "Go ") || strings.Contains(msg, "json:") {
				t.Errorf("decodeBody(%q) into a %T: %q names Go's types", b, v, msg)
			}
		}
		var req rls.RateLimitRequest
		err := protojson.Unmarshal(b, &req)
		if msg := protoErrorText(b, md); err == nil && msg != "" {
			t.Errorf("protoErrorText(%q) = %q, for a body protojson takes", b, msg)
		}
	})
}
