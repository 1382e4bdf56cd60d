// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"
)

// MaxLineLength is the longest trace line, in bytes, that a Reader accepts.
const MaxLineLength = 1 << 20

// Request is one request of a trace.
type Request struct {
	// Line is the request's 1-based line number in the trace.
	Line int
	// At is the request's offset from the start of the trace.
	At time.Duration
	// Key is the key the request is limited under.
	Key string
	// Cost is the number of units the request takes; 1 unless the line says
	// otherwise.
	Cost int64
}

// LineError reports a problem with one line of a trace, or a failure while
// replaying it.
type LineError struct {
	// Line is the 1-based line number.
	Line int
	// Err is the problem.
	Err error
}

// Error returns "replay: line N: " followed by the problem.
func (e *LineError) Error() string {
	return fmt.Sprintf("replay: line %d: %v", e.Line, e.Err)
}

// Unwrap returns e.Err.
func (e *LineError) Unwrap() error { return e.Err }

// Reader reads the requests of a trace. A trace has one request per line,
//
//	SECONDS KEY [COST]
//
// with the fields separated by spaces or tabs. SECONDS is the request's
// offset from the trace start in decimal seconds (see ParseSeconds) and
// never decreases from one line to the next; KEY is any sequence of bytes
// other than spaces and tabs; COST is a non-negative decimal integer and
// defaults to 1. Blank lines, and lines whose first field starts with '#',
// are skipped. Lines end with "\n" or "\r\n".
type Reader struct {
	sc   *bufio.Scanner
	line int
	last time.Duration
	keys map[string]string // interned keys
	err  error
}

// Keys up to maxInternLen bytes are interned, up to maxInterned of them, so
// that a trace's recurring keys cost one allocation each, not one per line.
const (
	maxInterned  = 1 << 14
	maxInternLen = 64
)

// NewReader returns a Reader that reads a trace from r. It buffers its
// input.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineLength)
	return &Reader{sc: sc, keys: make(map[string]string)}
}

// Read returns the next request. At the end of the trace it returns io.EOF.
// A problem with a line is a *LineError naming the line; after any error,
// Read keeps returning that error.
func (r *Reader) Read() (Request, error) {
	if r.err != nil {
		return Request{}, r.err
	}
	for r.sc.Scan() {
		r.line++
		req, skip, err := r.parse(r.sc.Bytes())
		if err != nil {
			r.err = &LineError{Line: r.line, Err: err}
			return Request{}, r.err
		}
		if !skip {
			return req, nil
		}
	}
	switch err := r.sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		r.err = &LineError{Line: r.line + 1, Err: fmt.Errorf("longer than %d bytes", MaxLineLength)}
	case err != nil:
		r.err = fmt.Errorf("replay: read trace: %w", err)
	default:
		r.err = io.EOF
	}
	return Request{}, r.err
}

// parse parses one line. It reports skip for blank and comment lines.
func (r *Reader) parse(b []byte) (req Request, skip bool, err error) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i == len(b) || b[i] == '#' {
		return req, true, nil
	}
	var fields [3][]byte
	n := 0
	for {
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		if i == len(b) {
			break
		}
		j := i
		for j < len(b) && !isSpace(b[j]) {
			j++
		}
		if n == len(fields) {
			return req, false, fmt.Errorf("too many fields: want SECONDS KEY [COST], found a fourth field %s", quote(b[i:j]))
		}
		fields[n] = b[i:j]
		n++
		i = j
	}
	at, err := parseSeconds(fields[0])
	if err != nil {
		return req, false, err
	}
	if n < 2 {
		return req, false, errors.New("missing key: want SECONDS KEY [COST]")
	}
	if at < r.last {
		return req, false, fmt.Errorf("time %s is earlier than the previous request's time %s: times must not decrease", AppendSeconds(nil, at), AppendSeconds(nil, r.last))
	}
	cost := int64(1)
	if n == 3 {
		if cost, err = parseCost(fields[2]); err != nil {
			return req, false, err
		}
	}
	r.last = at
	return Request{Line: r.line, At: at, Key: r.intern(fields[1]), Cost: cost}, false, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// intern returns b as a string, reusing the string of an earlier line with
// the same key where it can.
func (r *Reader) intern(b []byte) string {
	if k, ok := r.keys[string(b)]; ok { // no allocation for the lookup
		return k
	}
	k := string(b)
	if len(k) <= maxInternLen && len(r.keys) < maxInterned {
		r.keys[k] = k
	}
	return k
}
