// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// readAll reads every request of trace, returning them and the error that
// ended the trace (nil at io.EOF).
func readAll(trace string) ([]Request, error) {
	r := NewReader(strings.NewReader(trace))
	var reqs []Request
	for {
		req, err := r.Read()
		if err == io.EOF {
			return reqs, nil
		}
		if err != nil {
			return reqs, err
		}
		reqs = append(reqs, req)
	}
}

func TestReader(t *testing.T) {
	trace := "# a comment\n" +
		"\n" +
		"0 rider\n" +
		"  \t \n" +
		"0.1\trider\t2\r\n" +
		"   #indented comment\n" +
		"0.1 driver 0\n" +
		"\t59.5   partner   \t 7  \n" +
		"60 #not-a-comment\n" +
		"60 k\u00e9y\x00\x01\n" +
		"61 last" // no final newline
	got, err := readAll(trace)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{Line: 3, At: 0, Key: "rider", Cost: 1},
		{Line: 5, At: 100 * time.Millisecond, Key: "rider", Cost: 2},
		{Line: 7, At: 100 * time.Millisecond, Key: "driver", Cost: 0},
		{Line: 8, At: 59500 * time.Millisecond, Key: "partner", Cost: 7},
		{Line: 9, At: 60 * time.Second, Key: "#not-a-comment", Cost: 1},
		{Line: 10, At: 60 * time.Second, Key: "k\u00e9y\x00\x01", Cost: 1},
		{Line: 11, At: 61 * time.Second, Key: "last", Cost: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestReaderEmpty(t *testing.T) {
	for _, trace := range []string{"", "\n\n", "# only a comment\n", " \t\r\n"} {
		got, err := readAll(trace)
		if err != nil || len(got) != 0 {
			t.Errorf("trace %q: got %v, %v; want no requests", trace, got, err)
		}
	}
}

func TestReaderErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		trace string
		ok    int // requests read before the error
		line  int
		want  string
	}{
		{"malformed time", "0 a\nabc a\n", 1, 2, `time "abc": not a decimal number`},
		{"negative time", "-1 a\n", 0, 1, "negative"},
		{"decreasing time", "0 a\n2 a\n# c\n1.5 a\n", 2, 4, "time 1.5 is earlier than the previous request's time 2"},
		{"too precise time", "0.0000000001 a\n", 0, 1, "more than 9 digits"},
		{"time too late", "4611686019 a\n", 0, 1, "latest supported offset"},
		{"missing key", "\n0\n", 0, 2, "missing key"},
		{"negative cost", "0 a 1\n0 a -1\n", 1, 2, `cost "-1": negative`},
		{"malformed cost", "0 a 1.5\n", 0, 1, `cost "1.5": not a non-negative integer`},
		{"cost too large", "0 a 99999999999999999999\n", 0, 1, "too large"},
		{"too many fields", "0 a 1 extra\n", 0, 1, `too many fields: want SECONDS KEY [COST], found a fourth field "extra"`},
		{"line too long", "0 a\n1 " + strings.Repeat("k", MaxLineLength) + "\n", 1, 2, "longer than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(tt.trace)
			if len(got) != tt.ok {
				t.Errorf("read %d requests before the error, want %d", len(got), tt.ok)
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a *LineError", err)
			}
			if le.Line != tt.line {
				t.Errorf("error on line %d, want %d: %v", le.Line, tt.line, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line containing %q", msg, tt.want)
			}
		})
	}
}

func TestReaderErrorIsSticky(t *testing.T) {
	r := NewReader(strings.NewReader("x a\n0 b\n"))
	_, err1 := r.Read()
	_, err2 := r.Read()
	if err1 == nil || err1 != err2 {
		t.Errorf("Read after an error returned %v, then %v; want the same error", err1, err2)
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := NewReader(failingReader{boom}).Read()
	if !errors.Is(err, boom) {
		t.Errorf("Read = %v, want it to wrap %v", err, boom)
	}
}

func TestReaderInternsKeys(t *testing.T) {
	long := strings.Repeat("k", maxInternLen+1)
	for _, tt := range []struct {
		name  string
		trace string
		max   float64 // allocations beyond those of an empty trace
	}{
		// Two distinct keys: two strings, and the interning map's first
		// bucket; nothing per line.
		{"repeated keys", strings.Repeat("0 a\n0 b\n", 50), 3},
		// Long keys are not interned: one string per line.
		{"long keys", strings.Repeat("0 "+long+"\n", 50), 51},
	} {
		base := testing.AllocsPerRun(10, func() {
			_, _ = NewReader(strings.NewReader("")).Read()
		})
		allocs := testing.AllocsPerRun(10, func() {
			r := NewReader(strings.NewReader(tt.trace))
			for {
				if _, err := r.Read(); err != nil {
					return
				}
			}
		})
		if allocs-base > tt.max {
			t.Errorf("%s: reading 100 lines allocated %v times more than an empty trace, want at most %v", tt.name, allocs-base, tt.max)
		}
	}
}
