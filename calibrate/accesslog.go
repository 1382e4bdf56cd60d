// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/sluicehq/sluice/replay"
)

// The text access logs: nginx's and Apache's common and combined formats,
// Envoy's default format, and any nginx log_format written with $variables.

// LogFormats are the named text access-log formats (Format.Log), as
// templates of nginx variables.
var LogFormats = map[string]string{
	// Apache %h %l %u %t "%r" %>s %b; nginx writes "-" for the ident.
	"common":   `$remote_addr $ident $remote_user [$time_local] "$request" $status $body_bytes_sent`,
	"combined": `$remote_addr $ident $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`,
	// Envoy's default access log format, its %COMMAND%s named as nginx
	// would: START_TIME, "METHOD PATH PROTOCOL", RESPONSE_CODE, ...,
	// REQ(X-FORWARDED-FOR), REQ(USER-AGENT), REQ(X-REQUEST-ID),
	// REQ(:AUTHORITY), UPSTREAM_HOST.
	"envoy": `[$start_time] "$request" $status $response_flags $bytes_received $bytes_sent $duration $upstream_service_time "$http_x_forwarded_for" "$http_user_agent" "$http_x_request_id" "$http_host" "$upstream_host"`,
}

// reorderHorizon is how far back in time a text log's request may land
// behind one read before it: lines are written when requests end, so
// subtracting $request_time, and several workers writing one file, put
// arrivals slightly out of order. A request that started longer ago than
// this before the latest one read (a long $request_time) is placed at the
// latest time already given out. A line whose own time is more than this
// behind the latest line's is out of time order (rotated files
// concatenated newest first, say): an error, as for a trace.
const reorderHorizon = time.Minute

// segment is a piece of a template: literal text, or a variable.
type segment struct {
	lit, name string
}

// compileTemplate splits an nginx log_format into literals and variables.
func compileTemplate(t string) ([]segment, error) {
	var segs []segment
	for i := 0; i < len(t); {
		if t[i] != '$' {
			j := strings.IndexByte(t[i:], '$')
			if j < 0 {
				j = len(t) - i
			}
			segs = append(segs, segment{lit: t[i : i+j]})
			i += j
			continue
		}
		j := i + 1
		braced := j < len(t) && t[j] == '{'
		if braced {
			j++
		}
		k := j
		for k < len(t) && (t[k] == '_' || t[k] >= 'a' && t[k] <= 'z' || t[k] >= 'A' && t[k] <= 'Z' || t[k] >= '0' && t[k] <= '9') {
			k++
		}
		if k == j {
			return nil, fmt.Errorf("log format %q: a $ at byte %d names no variable", t, i)
		}
		name := strings.ToLower(t[j:k])
		if braced {
			if k >= len(t) || t[k] != '}' {
				return nil, fmt.Errorf("log format %q: ${ at byte %d is not closed", t, i)
			}
			k++
		}
		if len(segs) > 0 && segs[len(segs)-1].name != "" {
			return nil, fmt.Errorf("log format %q: $%s follows another variable with nothing between them", t, name)
		}
		segs = append(segs, segment{name: name})
		i = k
	}
	return segs, nil
}

// textLog reads a text access log.
type textLog struct {
	sc    *bufio.Scanner
	segs  []segment
	vars  map[string]int // variable name → index in vals
	vals  []string
	key   func(vals []string) (string, error)
	timeV string // the variable holding the time
	rtV   string // $request_time, when the format has it
	res   time.Duration
	line  int
	err   error
	// reordering: requests by arrival, released once the log has moved
	// reorderHorizon past them.
	pending  requestHeap
	latest   int64 // the latest log time read
	lastLine int   // the line it was read on
	released int64 // the latest arrival given out
}

func newTextLog(r io.Reader, f Format) (*textLog, error) {
	tmpl := f.Log
	if t, ok := LogFormats[f.Log]; ok {
		tmpl = t
	} else if !strings.Contains(f.Log, "$") {
		return nil, fmt.Errorf("calibrate: log format %q: want common, combined, envoy or an nginx log_format template with $variables", f.Log)
	}
	segs, err := compileTemplate(tmpl)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	l := &textLog{segs: segs, vars: map[string]int{}, released: -1 << 63}
	for _, s := range segs {
		if s.name != "" {
			l.vars[s.name] = len(l.vars)
		}
	}
	l.vals = make([]string, len(l.vars))
	has := func(v string) bool { _, ok := l.vars[v]; return ok }
	switch {
	case has("msec"):
		l.timeV, l.res = "msec", time.Millisecond
	case has("start_time"):
		l.timeV, l.res = "start_time", time.Millisecond
	case has("time_iso8601"):
		l.timeV, l.res = "time_iso8601", time.Second
	case has("time_local"):
		l.timeV, l.res = "time_local", time.Second
	default:
		return nil, fmt.Errorf("calibrate: log format %q has no time: want $msec, $time_local, $time_iso8601 or $start_time", tmpl)
	}
	if has("request_time") && l.timeV != "start_time" {
		l.rtV = "request_time"
	}
	if l.key, err = l.keyFunc(f.Key); err != nil {
		return nil, err
	}
	l.sc = bufio.NewScanner(r)
	l.sc.Buffer(make([]byte, 0, 64<<10), replay.MaxLineLength)
	return l, nil
}

// keyFunc returns the function that picks the key from a line's values.
func (l *textLog) keyFunc(spec string) (func([]string) (string, error), error) {
	get := func(v string) (func([]string) (string, error), error) {
		i, ok := l.vars[v]
		if !ok {
			return nil, fmt.Errorf("calibrate: --key %s: the log format has no $%s", spec, v)
		}
		return func(vals []string) (string, error) { return vals[i], nil }, nil
	}
	switch {
	case spec == "" || spec == "ip":
		if _, ok := l.vars["remote_addr"]; ok {
			return get("remote_addr")
		}
		// Envoy's default format has no peer address: the first
		// X-Forwarded-For address is the client's, as the edge saw it.
		if i, ok := l.vars["http_x_forwarded_for"]; ok {
			return func(vals []string) (string, error) {
				first, _, _ := strings.Cut(vals[i], ",")
				return strings.TrimSpace(first), nil
			}, nil
		}
		return nil, fmt.Errorf("calibrate: --key ip: the log format has neither $remote_addr nor $http_x_forwarded_for")
	case spec == "user":
		return get("remote_user")
	case spec == "path":
		if i, ok := l.vars["request"]; ok {
			return func(vals []string) (string, error) {
				f := strings.Fields(vals[i])
				if len(f) < 2 {
					return "", fmt.Errorf("request %q: want METHOD PATH PROTOCOL", vals[i])
				}
				p, _, _ := strings.Cut(f[1], "?")
				return p, nil
			}, nil
		}
		return get("uri")
	case strings.HasPrefix(spec, "header:"):
		return get("http_" + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(spec, "header:"), "-", "_")))
	case strings.HasPrefix(spec, "field:"):
		return get(strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(spec, "field:"), "$")))
	}
	return nil, fmt.Errorf("calibrate: --key %q: want ip, user, path, header:NAME or field:NAME", spec)
}

// Resolution is the resolution of the log's times: 1s for $time_local.
func (l *textLog) Resolution() time.Duration { return l.res }

func (l *textLog) Read() (Request, error) {
	for l.err == nil {
		if len(l.pending) > 0 && l.pending[0].At <= l.latest-int64(reorderHorizon) {
			return l.release(), nil
		}
		if !l.sc.Scan() {
			switch err := l.sc.Err(); {
			case errors.Is(err, bufio.ErrTooLong):
				l.err = &replay.LineError{Line: l.line + 1, Err: fmt.Errorf("longer than %d bytes", replay.MaxLineLength)}
			case err != nil:
				l.err = fmt.Errorf("read log: %w", err)
			default:
				l.err = io.EOF
			}
			break
		}
		l.line++
		if strings.TrimSpace(l.sc.Text()) == "" {
			continue
		}
		q, at, err := l.parse(l.sc.Text())
		if err != nil {
			l.err = &replay.LineError{Line: l.line, Err: err}
			break
		}
		if at < l.latest-int64(reorderHorizon) {
			l.err = &replay.LineError{Line: l.line, Err: fmt.Errorf("$%s %s is %v earlier than line %d's, %s: the log must be in time order, give or take %v (sort it first, or put rotated files oldest first)",
				l.timeV, time.Unix(0, at).UTC().Format(time.RFC3339Nano), time.Duration(l.latest-at), l.lastLine, time.Unix(0, l.latest).UTC().Format(time.RFC3339Nano), reorderHorizon)}
			break
		}
		if at >= l.latest {
			l.latest, l.lastLine = at, l.line
		}
		heap.Push(&l.pending, q)
	}
	if len(l.pending) > 0 && errors.Is(l.err, io.EOF) {
		return l.release(), nil
	}
	return Request{}, l.err
}

// release gives out the earliest pending request, never before one given
// out already.
func (l *textLog) release() Request {
	q := heap.Pop(&l.pending).(Request)
	q.At = max(q.At, l.released)
	l.released = q.At
	return q
}

// parse matches one line against the template, and returns its request
// (at its arrival) and the time the line was written.
func (l *textLog) parse(s string) (Request, int64, error) {
	pos := 0
	for i, seg := range l.segs {
		if seg.name == "" {
			if !strings.HasPrefix(s[pos:], seg.lit) {
				return Request{}, 0, fmt.Errorf("does not match the log format at byte %d: want %q, got %q", pos+1, seg.lit, clip(s[pos:]))
			}
			pos += len(seg.lit)
			continue
		}
		end := len(s)
		switch {
		case i+1 < len(l.segs):
			next := l.segs[i+1].lit
			quoted := i > 0 && strings.HasSuffix(l.segs[i-1].lit, `"`) && strings.HasPrefix(next, `"`)
			j := -1
			if quoted { // Apache escapes a quote inside as \"
				for k := pos; k < len(s); k++ {
					if s[k] == '\\' {
						k++
						continue
					}
					if strings.HasPrefix(s[k:], next) {
						j = k - pos
						break
					}
				}
			} else {
				j = strings.Index(s[pos:], next)
			}
			if j < 0 {
				return Request{}, 0, fmt.Errorf("does not match the log format: no %q after $%s", next, seg.name)
			}
			end = pos + j
		default: // the last variable ends at a space: later fields are ignored
			if j := strings.IndexByte(s[pos:], ' '); j >= 0 {
				end = pos + j
			}
		}
		l.vals[l.vars[seg.name]] = s[pos:end]
		pos = end
	}
	at, err := l.time(l.vals[l.vars[l.timeV]])
	if err != nil {
		return Request{}, 0, fmt.Errorf("$%s: %w", l.timeV, err)
	}
	arrival := at
	if l.rtV != "" {
		v := l.vals[l.vars[l.rtV]]
		if v != "-" {
			d, err := replay.ParseSeconds(v)
			if err != nil {
				return Request{}, 0, fmt.Errorf("$request_time %q: want seconds (0.123)", v)
			}
			arrival = max(0, at-int64(d))
		}
	}
	key, err := l.key(l.vals)
	if err != nil {
		return Request{}, 0, err
	}
	return Request{Line: l.line, At: arrival, Key: key, Cost: 1}, at, nil
}

// time parses a log time into nanoseconds since the Unix epoch.
func (l *textLog) time(v string) (int64, error) {
	var t time.Time
	var err error
	switch l.timeV {
	case "msec":
		d, err := replay.ParseSeconds(v)
		if err != nil {
			return 0, fmt.Errorf("%q: want seconds since the Unix epoch (1700000000.123)", v)
		}
		return int64(d), nil
	case "time_local":
		t, err = time.Parse("02/Jan/2006:15:04:05 -0700", v)
	default:
		t, err = time.Parse(time.RFC3339Nano, v)
	}
	if err != nil {
		return 0, fmt.Errorf("%q: %v", v, err)
	}
	if t.UnixNano() < 0 {
		return 0, fmt.Errorf("%q: before the Unix epoch", v)
	}
	return t.UnixNano(), nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// stripPort returns an address without its port: "192.0.2.1:5678" and
// "[2001:db8::1]:80" become "192.0.2.1" and "2001:db8::1"; anything else
// is returned as it is.
func stripPort(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// requestHeap orders requests by time, then line.
type requestHeap []Request

func (h requestHeap) Len() int { return len(h) }
func (h requestHeap) Less(i, j int) bool {
	return h[i].At < h[j].At || h[i].At == h[j].At && h[i].Line < h[j].Line
}
func (h requestHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *requestHeap) Push(x any)   { *h = append(*h, x.(Request)) }
func (h *requestHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	*h = old[:len(old)-1]
	return q
}
