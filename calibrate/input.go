// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"errors"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/replay"
)

// Request is one observed request. At is its time in nanoseconds since the
// Unix epoch (for a trace, its offset from the trace start, which replay
// places at the epoch).
type Request struct {
	Line int
	At   int64
	Key  string
	Cost int64
}

// Reader reads requests in time order; io.EOF ends the traffic. A problem
// with a line is a *replay.LineError naming it.
type Reader interface {
	Read() (Request, error)
}

// Format says how traffic is written.
type Format struct {
	// JSONL selects the access-log form: one JSON object per line, with
	// the time in TimeField (an RFC 3339 string or a number of seconds
	// since the Unix epoch), the key in KeyField (a string or a number) and,
	// if CostField is set and present, the cost (a non-negative integer;
	// default 1). Otherwise the traffic is a replay trace.
	JSONL                          bool
	TimeField, KeyField, CostField string
	// Log, when not empty, selects a text access log: "common" or
	// "combined" (nginx's and Apache's), "envoy" (Envoy's default access
	// log), or an nginx log_format template of $variables (LogFormats
	// holds the named ones). The time is $msec if present, else
	// $time_local, $time_iso8601 or Envoy's start time; when $request_time
	// is present, a request arrived that long before its line's time.
	// Every line costs 1. Lines, written as requests end, may be out of
	// time order by up to a minute; a line whose time is further behind
	// the latest line's is an error.
	Log string
	// Key says which part of a line is the key. For a text access log:
	// "ip" (the default: $remote_addr, or the first X-Forwarded-For address
	// in Envoy's format), "user" ($remote_user), "path" (the request path
	// without its query), "header:NAME" ($http_name) or "field:NAME" (any
	// variable of the template). For JSON lines, "ip" reads KeyField as an
	// address and drops its port (Envoy's %DOWNSTREAM_REMOTE_ADDRESS%).
	Key string
}

// NewReader returns a Reader of r in format f.
func NewReader(r io.Reader, f Format) (Reader, error) {
	if f.Log != "" {
		if f.JSONL {
			return nil, errors.New("calibrate: a format is JSON lines or a text log, not both")
		}
		return newTextLog(r, f)
	}
	if f.Key != "" && f.Key != "ip" {
		return nil, fmt.Errorf("calibrate: key %q: for JSON lines name the field (KeyField); Key may only be ip", f.Key)
	}
	if !f.JSONL {
		return traceReader{replay.NewReader(r)}, nil
	}
	if f.TimeField == "" || f.KeyField == "" {
		return nil, errors.New("calibrate: the JSON-lines format needs a time field and a key field")
	}
	return newJSONLReader(r, f), nil
}

type traceReader struct{ r *replay.Reader }

func (t traceReader) Read() (Request, error) {
	q, err := t.r.Read()
	return Request{Line: q.Line, At: int64(q.At), Key: q.Key, Cost: q.Cost}, err
}

// Source opens the traffic from its start; Calibrate calls it once per
// pass and closes what it returns.
type Source func() (Reader, io.Closer, error)
