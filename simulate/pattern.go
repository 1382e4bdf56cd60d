// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/replay"
)

// MaxRequests is the most requests a pattern may make.
const MaxRequests = 100_000

// PatternKey is the key every request of a pattern is made under.
const PatternKey = "k"

// ParsePattern parses a traffic pattern: clauses separated by commas (or
// semicolons), each optionally starting with "then", read left to right
// with a cursor that starts at time 0:
//
//	burst N [at TIME]          N requests at TIME (default: the cursor);
//	                           the cursor moves to TIME
//	N every DUR for DUR        N requests at each tick cursor+DUR,
//	                           cursor+2·DUR, ... up to and including
//	                           cursor+FOR; the cursor moves to cursor+FOR
//	N every DUR times K        the same for K ticks; the cursor moves K·DUR
//	wait DUR                   the cursor moves DUR
//
// and any clause but wait may end with "cost C" (each request costs C
// units; default 1). TIME and DUR are seconds ("0", "1.5") or Go durations
// ("100ms", "1m30s"). Times never go back: "at TIME" before the cursor is an
// error. Example:
//
//	burst 6 at 0, then 1 every 100ms for 2s
//
// is 6 requests at 0 and 20 more at 0.1 s, 0.2 s, ..., 2 s.
func ParsePattern(s string) ([]Request, error) {
	var out []Request
	cursor := time.Duration(0)
	clauses := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' })
	if len(clauses) == 0 {
		return nil, fmt.Errorf("pattern %q: empty (want e.g. \"burst 6 at 0, then 1 every 100ms for 2s\")", s)
	}
	for i, c := range clauses {
		w := strings.Fields(c)
		if len(w) > 0 && w[0] == "then" {
			w = w[1:]
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("pattern clause %d %q: %s", i+1, strings.TrimSpace(c), fmt.Sprintf(format, args...))
		}
		if len(w) == 0 {
			return nil, fail("empty clause")
		}
		cost := int64(1)
		if n := len(w); n >= 2 && w[n-2] == "cost" {
			v, err := strconv.ParseInt(w[n-1], 10, 64)
			if err != nil || v < 0 {
				return nil, fail("cost %q: want a non-negative integer", w[n-1])
			}
			cost, w = v, w[:n-2]
			if len(w) == 0 {
				return nil, fail("a cost with no requests: want \"burst N cost C\", \"N every DUR ... cost C\"")
			}
		}
		add := func(at time.Duration, n int64) error {
			if int64(len(out))+n > MaxRequests {
				return fail("more than %d requests in the pattern", MaxRequests)
			}
			for range n {
				out = append(out, Request{At: at, Key: PatternKey, Cost: cost})
			}
			return nil
		}
		switch {
		case w[0] == "wait":
			if len(w) != 2 {
				return nil, fail("want \"wait DUR\"")
			}
			d, err := parseTime(w[1])
			if err != nil {
				return nil, fail("%v", err)
			}
			if d > replay.MaxOffset-cursor {
				return nil, fail("goes past the latest time a trace may use")
			}
			cursor += d
		case w[0] == "burst":
			if len(w) != 2 && !(len(w) == 4 && w[2] == "at") {
				return nil, fail("want \"burst N [at TIME]\"")
			}
			n, err := count(w[1])
			if err != nil {
				return nil, fail("%v", err)
			}
			at := cursor
			if len(w) == 4 {
				if at, err = parseTime(w[3]); err != nil {
					return nil, fail("%v", err)
				}
				if at < cursor {
					return nil, fail("at %s is before the end of the previous clause, %ss: times never go back", w[3], replay.AppendSeconds(nil, cursor))
				}
			}
			if err := add(at, n); err != nil {
				return nil, err
			}
			cursor = at
		case len(w) == 5 && w[1] == "every" && (w[3] == "for" || w[3] == "times"):
			n, err := count(w[0])
			if err != nil {
				return nil, fail("%v", err)
			}
			every, err := parseTime(w[2])
			if err != nil {
				return nil, fail("%v", err)
			}
			if every <= 0 {
				return nil, fail("every %s: must be positive", w[2])
			}
			var ticks int64
			if w[3] == "for" {
				span, err := parseTime(w[4])
				if err != nil {
					return nil, fail("%v", err)
				}
				if span > replay.MaxOffset-cursor {
					return nil, fail("goes past the latest time a trace may use")
				}
				ticks = int64(span / every)
				if ticks > MaxRequests || ticks*n > MaxRequests {
					return nil, fail("more than %d requests in the pattern", MaxRequests)
				}
				for k := int64(1); k <= ticks; k++ {
					if err := add(cursor+time.Duration(k)*every, n); err != nil {
						return nil, err
					}
				}
				cursor += span
				continue
			}
			if ticks, err = count(w[4]); err != nil {
				return nil, fail("%v", err)
			}
			if ticks*n > MaxRequests {
				return nil, fail("more than %d requests in the pattern", MaxRequests)
			}
			if every > (replay.MaxOffset-cursor)/time.Duration(ticks) {
				return nil, fail("goes past the latest time a trace may use")
			}
			for k := int64(1); k <= ticks; k++ {
				if err := add(cursor+time.Duration(k)*every, n); err != nil {
					return nil, err
				}
			}
			cursor += time.Duration(ticks) * every
		default:
			return nil, fail("want \"burst N [at TIME]\", \"N every DUR for DUR\", \"N every DUR times K\" or \"wait DUR\"")
		}
		if cursor > replay.MaxOffset {
			return nil, fail("goes past the latest time a trace may use")
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pattern %q: makes no requests", s)
	}
	return out, nil
}

func count(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q: want a whole number of requests, at least 1", s)
	}
	if n > MaxRequests {
		return 0, fmt.Errorf("%q: more than %d requests", s, MaxRequests)
	}
	return n, nil
}

// parseTime parses seconds ("1.5") or a Go duration ("1500ms").
func parseTime(s string) (time.Duration, error) {
	d, err := replay.ParseSeconds(s)
	if err == nil {
		return d, nil
	}
	if isDecimal(s) {
		// A number of seconds refused for a reason of its own (past the
		// latest supported time, finer than a nanosecond): say which.
		return 0, err
	}
	d, err = time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("time %q: want seconds (1.5) or a duration (100ms, 2s)", s)
	}
	return d, nil
}

// isDecimal reports whether s is digits with at most one decimal point
// among them: what replay.ParseSeconds reads, range and precision aside.
func isDecimal(s string) bool {
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] >= '0' && s[i] <= '9':
			digits++
		case s[i] == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}
