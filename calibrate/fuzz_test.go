// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"strconv"
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

// FuzzParseSeconds: a JSON number is read exactly as the rational number it
// denotes, and accepted iff that is a whole number of nanoseconds in
// [0, replay.MaxOffset].
func FuzzParseSeconds(f *testing.F) {
	for _, s := range []string{"1e3", "1.5e-3", "0", "1.5", "17672256001234567890e-10", "1e-10", "1e30", "-0", "01", "1E+00009"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseSeconds(s)
		if !json.Valid([]byte(s)) || strings.TrimSpace(s) != s || strings.ContainsAny(s, `"[{tfn`) {
			return // not a JSON number: only valid numbers are compared
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			if x, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+")); err != nil || x > 1000 || x < -1000 {
				return // big.Rat cannot (or would work hard to) read a long exponent
			}
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big.Rat cannot read %q", s)
		}
		ns := new(big.Rat).Mul(r, big.NewRat(1e9, 1))
		want := ns.IsInt() && ns.Sign() >= 0 && ns.Num().Cmp(big.NewInt(int64(replay.MaxOffset))) <= 0
		if strings.HasPrefix(s, "-") {
			want = false // negative times, even -0, are refused
		}
		switch {
		case want && err != nil:
			t.Fatalf("%q: %v, want %s ns", s, err, ns.Num())
		case !want && err == nil:
			t.Fatalf("%q: accepted as %d, want an error", s, d)
		case want && big.NewInt(int64(d)).Cmp(ns.Num()) != 0:
			t.Fatalf("%q: %d ns, want %s", s, d, ns.Num())
		}
	})
}
