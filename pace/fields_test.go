// SPDX-License-Identifier: Apache-2.0

package pace

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

func TestParseList(t *testing.T) {
	h := http.Header{}
	h.Add("RateLimit", `"a,b";r=5;t=2, tok;r=1, "q\"x";r=0;t=3;x=y`)
	h.Add("RateLimit", `"c";r=-1`)
	want := []item{
		{name: "a,b", params: map[string]int64{"r": 5, "t": 2}},
		{name: "tok", params: map[string]int64{"r": 1}},
		{name: `q"x`, params: map[string]int64{"r": 0, "t": 3}},
		{name: "c"},
	}
	if got := parseList(h, "RateLimit"); !reflect.DeepEqual(got, want) {
		t.Errorf("parseList = %+v, want %+v", got, want)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"3", 3 * time.Second, true},
		{"-1", 0, false},
		{"99999999999999999", maxSeconds * time.Second, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"soon", 0, false},
	} {
		h := http.Header{"Retry-After": {c.v}}
		if got, ok := retryAfter(h, now); got != c.want || ok != c.ok {
			t.Errorf("Retry-After %q: %v, %v; want %v, %v", c.v, got, ok, c.want, c.ok)
		}
	}
}

// The parsers take any header value without panicking, and what they
// return is usable: non-negative parameters, non-negative waits within the
// bound.
func FuzzParseList(f *testing.F) {
	f.Add(`"a";r=5;t=2, tok;r=1`, "3")
	f.Add(`"a\";r=5`, "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(`;;,,"`, "-1")
	f.Fuzz(func(t *testing.T, list, ra string) {
		h := http.Header{"Ratelimit": {list}, "Retry-After": {ra}}
		for _, it := range parseList(h, "RateLimit") {
			for k, v := range it.params {
				if v < 0 {
					t.Errorf("%q: parameter %s=%d is negative", list, k, v)
				}
			}
		}
		if d, ok := retryAfter(h, time.Unix(0, 0)); d < 0 || d > maxSeconds*time.Second || (!ok && d != 0) {
			t.Errorf("Retry-After %q: %v, %v", ra, d, ok)
		}
	})
}
