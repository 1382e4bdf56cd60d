// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// maxSFInteger is the largest Integer of Structured Field Values (RFC 9651
// §3.3.1): fifteen digits. Larger numbers are sent as this.
const maxSFInteger = 999_999_999_999_999

// The problem types of draft-ietf-httpapi-ratelimit-headers-10 §5.
const (
	// ProblemQuotaExceeded is the RFC 9457 problem type of a 429 answer.
	ProblemQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
)

// validName reports whether a policy name can be sent as a Structured
// Field Values String: non-empty, printable ASCII.
func validName(s string) error {
	if s == "" {
		return fmt.Errorf("policy has no Name (the RateLimit headers need one)")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Errorf("policy name %q: byte %#x at %d is not printable ASCII", s, s[i], i)
		}
	}
	return nil
}

// appendSFString appends s as a Structured Field Values String. s is
// printable ASCII (validName).
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

func appendSFInt(b []byte, n int64) []byte {
	return strconv.AppendInt(b, min(max(n, 0), maxSFInteger), 10)
}

// ceilSeconds is d in whole seconds, rounded up; 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

// quota returns what RateLimit-Policy advertises for p: q, the capacity
// (the burst of the bucket kinds, the limit of the windows), and w, the
// seconds that capacity takes to refill from empty (the period of the
// windows), rounded up to at least 1 since the header has no fractions.
func quota(p sluice.Policy) (q, w int64) {
	q, window := p.Limit, p.Period
	if p.Algorithm.IsBucket() && p.Burst != 0 {
		q = p.Burst
		// Validate guarantees Burst×Period/Limit fits.
		hi, lo := bits.Mul64(uint64(p.Burst), uint64(p.Period))
		d, _ := bits.Div64(hi, lo, uint64(p.Limit))
		window = time.Duration(d)
	}
	return q, max(ceilSeconds(window), 1)
}

// policyItem formats p as a RateLimit-Policy list member.
func policyItem(p sluice.Policy) string {
	q, w := quota(p)
	b := appendSFString(nil, p.Name)
	b = append(b, ";q="...)
	b = appendSFInt(b, q)
	b = append(b, ";w="...)
	b = appendSFInt(b, w)
	return string(b)
}

// outcome is one enforced limit's decision on a request.
type outcome struct {
	l *limit
	d sluice.Decision
}

// reset is the t parameter of d: for a refusal the seconds until the same
// request can be admitted, otherwise until the key is idle again. ok is
// false for a refusal no wait can cure.
func reset(d sluice.Decision) (t int64, ok bool) {
	if !d.Allowed {
		if d.Impossible {
			return 0, false
		}
		return ceilSeconds(d.RetryAfter), true
	}
	return ceilSeconds(d.ResetAfter), true
}

// writeHeaders sets RateLimit-Policy and RateLimit (and the legacy headers
// when asked) for the outcomes. policy, when not empty, is the
// RateLimit-Policy value already joined.
func writeHeaders(h http.Header, outs []outcome, policy string, legacy bool) {
	if len(outs) == 0 {
		return
	}
	var buf [256]byte
	b := buf[:0]
	if policy == "" {
		for i, o := range outs {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(b, o.l.item...)
		}
		policy = string(b)
		b = b[:0]
	}
	// On a refusal only the violated policies get a t, equal to their wait
	// in whole seconds: Retry-After, at least as long, then never precedes
	// a reset (draft §6). The others' resets could be later and mislead.
	refused := false
	for _, o := range outs {
		refused = refused || !o.d.Allowed
	}
	for i, o := range outs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = AppendStateItem(b, o.l.policy.Name, o.d, refused)
	}
	vals := make([]string, 2)
	vals[0], vals[1] = policy, string(b)
	h["Ratelimit-Policy"] = vals[0:1:1]
	h["Ratelimit"] = vals[1:2:2]
	if !legacy {
		return
	}
	// The legacy headers describe one policy: the one that refused with the
	// longest wait, else the one with the least left.
	best := 0
	for i, o := range outs[1:] {
		b := outs[best].d
		switch {
		case !o.d.Allowed && (b.Allowed || o.d.RetryAfter > b.RetryAfter):
			best = i + 1
		case o.d.Allowed && b.Allowed && o.d.Remaining < b.Remaining:
			best = i + 1
		}
	}
	limit, remaining, resetSeconds := Legacy(outs[best].l.policy, outs[best].d)
	h["X-Ratelimit-Limit"] = []string{limit}
	h["X-Ratelimit-Remaining"] = []string{remaining}
	h["X-Ratelimit-Reset"] = []string{resetSeconds}
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail,omitempty"`
	Violated []string `json:"violated-policies,omitempty"`
}

// writeProblem sends p as application/problem+json with p.Status.
func writeProblem(w http.ResponseWriter, p problem) {
	body, err := json.Marshal(p)
	if err != nil { // cannot happen: strings and an int
		body = []byte(`{"type":"about:blank"}`)
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/problem+json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body) + 1)}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(p.Status)
	w.Write(append(body, '\n'))
}

// quoteList formats names for a problem's detail.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// withoutResets returns the RateLimit field value v (a list of items as
// AppendStateItem writes them) without its items' t parameters; a t inside
// a quoted policy name is kept.
func withoutResets(v string) string {
	b := make([]byte, 0, len(v))
	quoted := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case quoted:
			b = append(b, c)
			if c == '\\' && i+1 < len(v) {
				i++
				b = append(b, v[i])
			} else if c == '"' {
				quoted = false
			}
		case c == '"':
			quoted = true
			b = append(b, c)
		case c == ';' && strings.HasPrefix(v[i+1:], "t="):
			j := i + 3
			for j < len(v) && v[j] >= '0' && v[j] <= '9' {
				j++
			}
			i = j - 1
		default:
			b = append(b, c)
		}
	}
	return string(b)
}
