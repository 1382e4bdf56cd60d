// SPDX-License-Identifier: Apache-2.0

package pace

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// item is one member of a RateLimit or RateLimit-Policy list: a name and
// its integer parameters.
type item struct {
	name   string
	params map[string]int64
	// conc: the parameter qu="concurrent-requests" (an in-flight limit).
	conc bool
}

// parseList parses a Structured Field Values list (RFC 9651) of Strings or
// Tokens with integer parameters, such as `"default";r=5;t=1, "x";r=0`.
// Members it cannot read are skipped; parameters that are not integers are
// ignored.
func parseList(h http.Header, field string) []item {
	var items []item
	for _, v := range h.Values(field) {
		for s := v; s != ""; {
			var it item
			var ok bool
			it, s, ok = parseItem(s)
			if ok {
				items = append(items, it)
			}
			// Skip to the next member.
			if i := strings.IndexByte(s, ','); i >= 0 {
				s = s[i+1:]
			} else {
				s = ""
			}
		}
	}
	return items
}

// parseItem reads one list member at the start of s and returns the rest.
func parseItem(s string) (it item, rest string, ok bool) {
	s = strings.TrimLeft(s, " \t")
	switch {
	case strings.HasPrefix(s, `"`):
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return it, "", false
		}
		it.name, s = b.String(), s[i+1:]
	default:
		i := strings.IndexAny(s, ";, \t")
		if i < 0 {
			i = len(s)
		}
		if i == 0 {
			return it, s, false
		}
		it.name, s = s[:i], s[i:]
	}
	for strings.HasPrefix(s, ";") {
		s = strings.TrimLeft(s[1:], " ")
		i := strings.IndexAny(s, ";, \t")
		if i < 0 {
			i = len(s)
		}
		k, v, _ := strings.Cut(s[:i], "=")
		s = s[i:]
		if k == "qu" && v == `"concurrent-requests"` {
			it.conc = true
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			if it.params == nil {
				it.params = map[string]int64{}
			}
			it.params[k] = n
		}
	}
	return it, s, true
}

// retryAfter reads a Retry-After field: delay-seconds or an HTTP-date,
// relative to now. ok is false when there is none or it cannot be read.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return seconds(n), n >= 0
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxSeconds*time.Second), true
	}
	return 0, false
}

// maxSeconds bounds the waits read from headers (a year), so that a huge
// value cannot overflow a time.Duration.
const maxSeconds = 365 * 24 * 3600

// seconds converts whole seconds from a header to a Duration.
func seconds(n int64) time.Duration {
	return time.Duration(min(max(n, 0), maxSeconds)) * time.Second
}
