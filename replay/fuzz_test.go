// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

// FuzzParseTrace reads any input as a trace. It must never panic; every
// request it accepts has a time in [0, MaxOffset] that never decreases and
// round-trips through AppendSeconds, a key without separators, a
// non-negative cost and increasing line numbers; the JSON line written for
// it is valid and carries the key as encoding/json would; and every error
// is one line.
func FuzzParseTrace(f *testing.F) {
	for _, seed := range []string{
		"0 rider\n0.1 rider\n0.2 rider 2\n",
		"# comment\n\n59 partner\n60\tpartner\t0\r\n",
		"1.5 a\n1 a\n",
		"0.0000000001 a\n",
		"4611686018.427387904 k 9223372036854775807\n",
		"0 a 1 2\n",
		"0 \"\\\xff\u2028\n",
		".5 a\n5. b\n",
		"-1 a\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		var last Request
		for {
			req, err := r.Read()
			if err == io.EOF {
				return
			}
			if err != nil {
				var le *LineError
				if !errors.As(err, &le) || le.Line < 1 || le.Line <= last.Line {
					t.Fatalf("error %v: want a *LineError after line %d", err, last.Line)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %q spans more than one line", err)
				}
				return
			}
			if req.Line <= last.Line || req.At < last.At || req.At < 0 || req.At > MaxOffset {
				t.Fatalf("request %+v after %+v", req, last)
			}
			if at, err := ParseSeconds(string(AppendSeconds(nil, req.At))); err != nil || at != req.At {
				t.Fatalf("time %d formats as %s, which parses as %d, %v", req.At, AppendSeconds(nil, req.At), at, err)
			}
			if req.Key == "" || strings.ContainsAny(req.Key, " \t\n") || req.Cost < 0 {
				t.Fatalf("bad request %+v", req)
			}
			rec := appendRecord(nil, req, sluice.Decision{Limit: 1, RetryAfter: req.At}, false)
			var got struct {
				T         json.Number
				Key       string
				KeyQuoted *string `json:"key_quoted"`
			}
			if err := json.Unmarshal(rec, &got); err != nil {
				t.Fatalf("record %s is not valid JSON: %v", rec, err)
			}
			if valid := utf8.ValidString(req.Key); valid != (got.KeyQuoted == nil) {
				t.Fatalf("record %s: key %q: key_quoted present %v, want it iff the key is not valid UTF-8", rec, req.Key, got.KeyQuoted != nil)
			} else if !valid {
				if k, err := strconv.Unquote(*got.KeyQuoted); err != nil || k != req.Key {
					t.Fatalf("record %s: key_quoted unquotes to %q, %v; want %q", rec, k, err, req.Key)
				}
			}
			checkJSONString(t, req.Key)
			last = req
		}
	})
}

// FuzzParseSeconds checks ParseSeconds against exact rational arithmetic:
// whatever it accepts, it reads exactly.
func FuzzParseSeconds(f *testing.F) {
	for _, s := range []string{"0", "0.1", "59.999999999", ".5", "5.", "1e3", "4611686018.427387904", "0.1000000000", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseSeconds(s)
		if err != nil {
			return
		}
		want, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("ParseSeconds(%q) = %d, but it is not a number", s, d)
		}
		want.Mul(want, big.NewRat(int64(time.Second), 1))
		if !want.IsInt() || want.Num().Cmp(big.NewInt(int64(d))) != 0 {
			t.Fatalf("ParseSeconds(%q) = %d, want %s ns", s, d, want.RatString())
		}
	})
}
