// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/replay"
)

// jsonlReader reads an access log of JSON objects, one per line.
type jsonlReader struct {
	sc                 *bufio.Scanner
	timeF, keyF, costF string
	line               int
	last               int64
	err                error
	keys               map[string]string
	ip                 bool // drop a port from the key
}

func newJSONLReader(r io.Reader, f Format) *jsonlReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), replay.MaxLineLength)
	return &jsonlReader{sc: sc, timeF: f.TimeField, keyF: f.KeyField, costF: f.CostField, last: -1, keys: map[string]string{}, ip: f.Key == "ip"}
}

func (r *jsonlReader) Read() (Request, error) {
	if r.err != nil {
		return Request{}, r.err
	}
	for r.sc.Scan() {
		r.line++
		req, skip, err := r.parse(r.sc.Bytes())
		if err != nil {
			r.err = &replay.LineError{Line: r.line, Err: err}
			return Request{}, r.err
		}
		if !skip {
			return req, nil
		}
	}
	switch err := r.sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		r.err = &replay.LineError{Line: r.line + 1, Err: fmt.Errorf("longer than %d bytes", replay.MaxLineLength)}
	case err != nil:
		r.err = fmt.Errorf("read log: %w", err)
	default:
		r.err = io.EOF
	}
	return Request{}, r.err
}

func (r *jsonlReader) parse(b []byte) (req Request, skip bool, err error) {
	i := skipSpace(b, 0)
	if i == len(b) {
		return req, true, nil
	}
	var vals [3][]byte
	if err := scanObject(b, i, [3]string{r.timeF, r.keyF, r.costF}, &vals); err != nil {
		return req, false, err
	}
	if vals[0] == nil {
		return req, false, fmt.Errorf("missing time field %q", r.timeF)
	}
	if vals[1] == nil {
		return req, false, fmt.Errorf("missing key field %q", r.keyF)
	}
	at, err := parseTime(vals[0])
	if err != nil {
		return req, false, fmt.Errorf("field %q: %w", r.timeF, err)
	}
	if at < r.last {
		return req, false, fmt.Errorf("field %q: time %s is earlier than the previous line's, %s: the log must be in time order (sort it first)", r.timeF, vals[0], time.Unix(0, r.last).UTC().Format(time.RFC3339Nano))
	}
	r.last = at
	key, err := r.key(vals[1])
	if err != nil {
		return req, false, fmt.Errorf("field %q: %w", r.keyF, err)
	}
	if r.ip {
		key = stripPort(key)
	}
	cost := int64(1)
	if r.costF != "" && vals[2] != nil {
		c, err := strconv.ParseInt(string(vals[2]), 10, 64)
		if err != nil || c < 0 {
			return req, false, fmt.Errorf("field %q: cost %s: want a non-negative integer", r.costF, vals[2])
		}
		cost = c
	}
	return Request{Line: r.line, At: at, Key: key, Cost: cost}, false, nil
}

// key returns a key field's value: a string's contents, or a number's text.
func (r *jsonlReader) key(v []byte) (string, error) {
	switch v[0] {
	case '"':
		raw := v[1 : len(v)-1]
		for _, c := range raw {
			if c == '\\' {
				var s string
				if err := json.Unmarshal(v, &s); err != nil {
					return "", fmt.Errorf("key %s: %w", v, err)
				}
				return s, nil
			}
		}
		if k, ok := r.keys[string(raw)]; ok {
			return k, nil
		}
		k := string(raw)
		if len(r.keys) < 1<<14 && len(k) <= 64 {
			r.keys[k] = k
		}
		return k, nil
	case '{', '[', 'n', 't', 'f':
		return "", fmt.Errorf("key %s: want a string or a number", v)
	}
	return string(v), nil
}

// parseTime parses a time field: an RFC 3339 string, or a number of seconds
// since the Unix epoch (a JSON number, or a string holding one), read
// exactly to the nanosecond.
func parseTime(v []byte) (int64, error) {
	if v[0] == '"' {
		t, err := time.Parse(time.RFC3339Nano, string(v[1:len(v)-1]))
		if err != nil {
			// A number of seconds in a string ("1767225600.25").
			if d, derr := parseSeconds(string(v[1 : len(v)-1])); derr == nil {
				return int64(d), nil
			}
			return 0, fmt.Errorf("time %s: want RFC 3339 (2006-01-02T15:04:05.999Z07:00) or a number of seconds since the Unix epoch", v)
		}
		ns := t.UnixNano()
		if ns < 0 {
			return 0, fmt.Errorf("time %s: before the Unix epoch", v)
		}
		return ns, nil
	}
	d, err := parseSeconds(string(v))
	if err != nil {
		return 0, fmt.Errorf("%w (want RFC 3339 or a number of seconds since the Unix epoch)", err)
	}
	return int64(d), nil
}

// parseSeconds parses a number of seconds exactly, with integer arithmetic:
// a plain decimal as replay.ParseSeconds does, or a JSON number with an
// exponent ("1e3", "1.5E-3"), which it rewrites as the plain decimal of the
// same value. Like a plain decimal, a value that is not a whole number of
// nanoseconds is an error, never rounded.
func parseSeconds(s string) (time.Duration, error) {
	e := strings.IndexAny(s, "eE")
	if e < 0 {
		return replay.ParseSeconds(s)
	}
	bad := func(why string) (time.Duration, error) {
		q := s
		if len(q) > 40 {
			q = q[:40] + "…"
		}
		return 0, fmt.Errorf("time %q: %s", q, why)
	}
	// JSON: -? (0 | [1-9][0-9]*) (. [0-9]+)? [eE] [+-]? [0-9]+
	mant, exp := s[:e], s[e+1:]
	if strings.HasPrefix(mant, "-") {
		return bad("negative (want seconds since the Unix epoch)")
	}
	intPart, fracPart, hasDot := strings.Cut(mant, ".")
	if !allDigits(intPart) || (len(intPart) > 1 && intPart[0] == '0') || (hasDot && !allDigits(fracPart)) {
		return bad("not a JSON number")
	}
	neg := false
	if exp != "" && (exp[0] == '+' || exp[0] == '-') {
		neg, exp = exp[0] == '-', exp[1:]
	}
	if !allDigits(exp) {
		return bad("not a JSON number")
	}
	// The value is digits × 10^(point − len(digits)): point is where the
	// decimal point falls in digits.
	all := intPart + fracPart
	digits := strings.TrimLeft(all, "0")
	lead := len(all) - len(digits)
	if digits = strings.TrimRight(digits, "0"); digits == "" {
		return 0, nil
	}
	x := strings.TrimLeft(exp, "0")
	if len(x) > 6 { // |exponent| ≥ 10⁶: far out of range either way
		x = "1000000"
	}
	n, _ := strconv.Atoi(x)
	if neg {
		n = -n
	}
	point := len(intPart) + n - lead
	switch {
	case point > 20:
		return bad(fmt.Sprintf("later than the latest supported offset, %s seconds", replay.AppendSeconds(nil, replay.MaxOffset)))
	case len(digits)-point > 9:
		return bad("more than 9 digits after the decimal point (times are whole nanoseconds)")
	case point <= 0:
		digits = "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		digits += strings.Repeat("0", point-len(digits))
	default:
		digits = digits[:point] + "." + digits[point:]
	}
	d, err := replay.ParseSeconds(digits)
	if err != nil {
		return bad(fmt.Sprintf("later than the latest supported offset, %s seconds", replay.AppendSeconds(nil, replay.MaxOffset)))
	}
	return d, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// scanObject scans the JSON object starting at b[i] and stores in vals the
// raw values of its top-level fields named in names (an empty name matches
// nothing). It checks the structure (braces, brackets, strings, separators)
// but not the contents of the values it skips.
func scanObject(b []byte, i int, names [3]string, vals *[3][]byte) error {
	if b[i] != '{' {
		return fmt.Errorf("not a JSON object: starts with %q", b[i])
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return trailing(b, i+1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errors.New("malformed JSON: want a field name in double quotes")
		}
		kend, esc, err := skipString(b, i)
		if err != nil {
			return err
		}
		name := b[i+1 : kend-1]
		if esc {
			var s string
			if err := json.Unmarshal(b[i:kend], &s); err != nil {
				return fmt.Errorf("malformed JSON field name: %w", err)
			}
			name = []byte(s)
		}
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return fmt.Errorf("malformed JSON: want ':' after field name %q", name)
		}
		i = skipSpace(b, i+1)
		end, err := skipValue(b, i)
		if err != nil {
			return fmt.Errorf("field %q: %w", name, err)
		}
		for n, want := range names {
			if want != "" && string(name) == want {
				vals[n] = b[i:end]
			}
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return errors.New("malformed JSON: object not closed")
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return trailing(b, i+1)
		default:
			return fmt.Errorf("malformed JSON: want ',' or '}' after field %q, found %q", name, b[i])
		}
	}
}

func trailing(b []byte, i int) error {
	if i = skipSpace(b, i); i != len(b) {
		return errors.New("malformed JSON: text after the object (want one object per line)")
	}
	return nil
}

// skipString returns the index just past the string starting at b[i] and
// whether it holds escapes.
func skipString(b []byte, i int) (int, bool, error) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc, nil
		}
	}
	return 0, false, errors.New("malformed JSON: string not closed")
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("malformed JSON: missing value")
	}
	switch b[i] {
	case '"':
		end, _, err := skipString(b, i)
		return end, err
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("malformed JSON: object or array not closed")
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' {
		j++
	}
	if j == i {
		return 0, fmt.Errorf("malformed JSON: unexpected %q where a value belongs", b[i])
	}
	return j, nil
}
