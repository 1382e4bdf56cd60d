// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/model"
)

// MaxOffset is the latest offset from the trace start that a trace may use:
// model.MaxTime, the latest instant the models accept, since the trace
// starts at the Unix epoch.
const MaxOffset = time.Duration(model.MaxTime)

const maxWholeSeconds = int64(MaxOffset / time.Second)

// ParseSeconds parses a trace time: a non-negative decimal number of seconds
// such as "0", "59", "0.1" or "1.000000001", exactly, with integer
// arithmetic: "0.1" is exactly 100ms. Digits may be omitted on one side of
// the decimal point (".5", "5.") but not on both. Digits beyond the ninth
// after the point are accepted only if they are zeros: a time that is not a
// whole number of nanoseconds is an error, never rounded. Signs, exponents,
// spaces and underscores are errors, as is an offset beyond MaxOffset.
func ParseSeconds(s string) (time.Duration, error) {
	return parseSeconds(s)
}

var errNoDigits = errors.New("not a decimal number of seconds")

// parseSeconds is ParseSeconds for both strings and byte slices, so the
// trace reader parses its lines without allocating.
func parseSeconds[T string | []byte](s T) (time.Duration, error) {
	var whole, frac int64
	var wholeDigits, fracDigits int
	dot := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			d := int64(c - '0')
			if !dot {
				wholeDigits++
				whole = whole*10 + d
				if whole > maxWholeSeconds {
					return 0, fmt.Errorf("time %s: later than the latest supported offset, %s seconds", quote(s), AppendSeconds(nil, MaxOffset))
				}
				continue
			}
			fracDigits++
			if fracDigits <= 9 {
				frac = frac*10 + d
			} else if d != 0 {
				return 0, fmt.Errorf("time %s: more than 9 digits after the decimal point (times are whole nanoseconds)", quote(s))
			}
		case c == '.' && !dot:
			dot = true
		case c == '-' && i == 0:
			return 0, fmt.Errorf("time %s: negative (want seconds since the trace start)", quote(s))
		default:
			return 0, fmt.Errorf("time %s: %w", quote(s), errNoDigits)
		}
	}
	if wholeDigits+fracDigits == 0 {
		return 0, fmt.Errorf("time %s: %w", quote(s), errNoDigits)
	}
	for n := min(fracDigits, 9); n < 9; n++ {
		frac *= 10
	}
	ns := whole*int64(time.Second) + frac // at most about 2⁶² + 10⁹: no overflow
	if ns > int64(MaxOffset) {
		return 0, fmt.Errorf("time %s: later than the latest supported offset, %s seconds", quote(s), AppendSeconds(nil, MaxOffset))
	}
	return time.Duration(ns), nil
}

// AppendSeconds appends d as a decimal number of seconds, exactly and in the
// shortest form: 1300ms is "1.3", 333333334ns is "0.333333334", 0 is "0",
// -1500ms is "-1.5". It never goes through floating point, and its output is
// a valid JSON number that ParseSeconds reads back as d (when d ≥ 0).
func AppendSeconds(dst []byte, d time.Duration) []byte {
	u := uint64(d)
	if d < 0 {
		dst = append(dst, '-')
		u = -u // two's complement magnitude, correct for math.MinInt64 too
	}
	dst = strconv.AppendUint(dst, u/uint64(time.Second), 10)
	frac := u % uint64(time.Second)
	if frac == 0 {
		return dst
	}
	var buf [10]byte
	buf[0] = '.'
	for i := 9; i >= 1; i-- {
		buf[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 10
	for buf[n-1] == '0' {
		n--
	}
	return append(dst, buf[:n]...)
}

// parseCost parses a trace cost: a non-negative decimal integer.
func parseCost(b []byte) (int64, error) {
	if len(b) > 0 && b[0] == '-' {
		return 0, fmt.Errorf("cost %s: negative (want an integer ≥ 0)", quote(b))
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("cost %s: not a non-negative integer", quote(b))
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, fmt.Errorf("cost %s: too large (at most %d)", quote(b), int64(1<<63-1))
		}
		n = n*10 + d
	}
	return n, nil
}

// quote returns s quoted for an error message, shortened if it is long, so
// that an error always fits on one line.
func quote[T string | []byte](s T) string {
	const maxLen = 40
	if len(s) > maxLen {
		return strconv.Quote(string(s[:maxLen])) + "…"
	}
	return strconv.Quote(string(s))
}
