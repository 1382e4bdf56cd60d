// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/replay"
)

// FuzzJSONL: any line either parses into a request with a key and a time,
// or fails with a *replay.LineError naming line 1; it never panics.
func FuzzJSONL(f *testing.F) {
	for _, s := range []string{`{"ts":"2026-01-01T00:00:00Z","user":"a","w":2}`, `{"ts":1.5,"user":7}`, `{"user":"a\"b","ts":0,"x":[1,{"y":"}"}]}`, `{"ts":`, `[]`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\r\n") {
			return
		}
		r, _ := NewReader(strings.NewReader(line), Format{JSONL: true, TimeField: "ts", KeyField: "user", CostField: "w"})
		q, err := r.Read()
		var le *replay.LineError
		switch {
		case err == io.EOF:
		case err != nil:
			if !errors.As(err, &le) || le.Line != 1 {
				t.Fatalf("error %v is not a line error for line 1", err)
			}
		case q.Line != 1 || q.Cost < 0 || q.At < 0:
			t.Fatalf("request %+v", q)
		}
	})
}
