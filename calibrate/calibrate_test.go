// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/replay"
)

func source(data string, f Format) Source {
	return func() (Reader, io.Closer, error) {
		r, err := NewReader(strings.NewReader(data), f)
		return r, io.NopCloser(nil), err
	}
}

// traffic makes a trace: keys with different rates and bursts.
func traffic(seed uint64, keys, lines int) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	t := int64(0)
	for i := 0; i < lines; i++ {
		t += rng.Int64N(int64(20 * time.Millisecond))
		k := rng.IntN(keys)
		k = k * k / keys // some keys much busier than others
		cost := 1
		if rng.IntN(10) == 0 {
			cost = 1 + rng.IntN(4)
		}
		fmt.Fprintf(&b, "%s k%d %d\n", replay.AppendSeconds(nil, time.Duration(t)), k, cost)
	}
	return b.String()
}

// TestRecommendationIsExact checks the contract of the package doc: the
// recommendation keeps at least ⌈q·K⌉ keys unrefused, and one unit less of
// its calibrated parameter keeps fewer (the edge).
func TestRecommendationIsExact(t *testing.T) {
	trace := traffic(7, 60, 6000)
	src := source(trace, Format{})
	ctx := context.Background()
	for _, alg := range sluice.Algorithms() {
		for _, keep := range []int64{500_000_000, 900_000_000, 990_000_000, Billion} {
			for _, period := range []time.Duration{time.Second, 3 * time.Second} {
				name := fmt.Sprintf("%s/keep=%s/period=%v", alg, percent(keep), period)
				t.Run(name, func(t *testing.T) {
					rep, err := Calibrate(ctx, src, Config{Algorithm: alg, Keep: keep, Period: period})
					if err != nil {
						t.Fatal(err)
					}
					kept := int64(rep.Keys - rep.Replay.KeysRefused)
					if kept < rep.MustKeep {
						t.Fatalf("%v kept %d keys, want at least %d", rep.Policy, kept, rep.MustKeep)
					}
					if keep == Billion && rep.Replay.Refused != 0 {
						t.Fatalf("keep 100%%: %v refused %d requests", rep.Policy, rep.Replay.Refused)
					}
					tighter := rep.Policy
					if alg.IsBucket() {
						tighter.Burst--
					} else {
						tighter.Limit--
					}
					if tighter.Burst < 0 || tighter.Limit < 1 || (alg.IsBucket() && tighter.Burst == 0) {
						return // nothing tighter to try
					}
					out, err := Replay(ctx, src, tighter)
					if err != nil {
						t.Fatal(err)
					}
					if kept := int64(rep.Keys - out.KeysRefused); kept >= rep.MustKeep {
						t.Fatalf("%v (one less than recommended) still kept %d keys, want fewer than %d: the recommendation is not the tightest", tighter, kept, rep.MustKeep)
					}
				})
			}
		}
	}
}

func TestFixedLimitCalibratesBurst(t *testing.T) {
	trace := "0 a\n0 a\n0 a\n0.5 a\n1 b\n"
	rep, err := Calibrate(context.Background(), source(trace, Format{}), Config{Algorithm: sluice.TokenBucket, Limit: 2, Keep: Billion})
	if err != nil {
		t.Fatal(err)
	}
	// a: 3 at 0 need 3 tokens; at 0.5 one token has come back, 3 more
	// would be... 1 more needs debt 2·0.5s−0.5s+0.5s = 1.5s → 3 tokens.
	if rep.Policy.Limit != 2 || rep.Policy.Burst != 3 {
		t.Fatalf("policy %v, want limit 2 burst 3", rep.Policy)
	}
	if rep.Replay.Refused != 0 {
		t.Fatalf("refused %d", rep.Replay.Refused)
	}
}

func TestPeaks(t *testing.T) {
	trace := "0 a\n0.5 a\n0.9 a\n1.0 a\n1.1 b\n61 b 5\n"
	rep, err := Calibrate(context.Background(), source(trace, Format{}), Config{Algorithm: sluice.FixedWindow, Windows: []time.Duration{time.Second, time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	// a: 3 in [0,1s), 4 in [0,1m); b: 5 in [61,62), 5 in [1m,2m).
	want := []string{"1s [3 5 5 5 5]", "1m0s [4 5 5 5 5]"}
	for i, d := range rep.Peaks {
		if got := fmt.Sprintf("%v %v", d.Window, d.At); got != want[i] {
			t.Errorf("peaks[%d] = %s, want %s", i, got, want[i])
		}
	}
	// The limit is 5 (b's 5 at 61 s). At 5 per second a needs a burst of
	// 2 (at 1.0 s, 0.1 s after 0.9 s), b of 5.
	if got := fmt.Sprint(rep.Policy.Limit, rep.Burst.At); got != "5 [2 5 5 5 5]" {
		t.Errorf("limit and bursts %s, want 5 [2 5 5 5 5]", got)
	}
	if rep.Requests != 6 || rep.Units != 10 || rep.Keys != 2 {
		t.Errorf("requests %d units %d keys %d, want 6 10 2", rep.Requests, rep.Units, rep.Keys)
	}
}

func TestJSONL(t *testing.T) {
	log := `{"ts":"1970-01-01T00:00:00Z","user":"ann","path":"/a","n":{"x":[1,"}"]}}
{"user":"bob","ts":0.25}

{"ts":"1970-01-01T00:00:00.5Z","user":42,"w":3}
{"ts":1,"user":"a\"b","w":2}
{"ts":"1.5","user":"c"}
`
	r, err := NewReader(strings.NewReader(log), Format{JSONL: true, TimeField: "ts", KeyField: "user", CostField: "w"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		q, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%d:%s:%d", q.Line, q.At, q.Key, q.Cost))
	}
	want := `[1:0:ann:1 2:250000000:bob:1 4:500000000:42:3 5:1000000000:a"b:2 6:1500000000:c:1]`
	if fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestJSONLErrors(t *testing.T) {
	f := Format{JSONL: true, TimeField: "ts", KeyField: "user"}
	for _, tc := range []struct{ log, want string }{
		{`{"ts":1}`, `line 1: missing key field "user"`},
		{"{\"ts\":1,\"user\":\"a\"}\n{\"user\":\"a\"}", `line 2: missing time field "ts"`},
		{`{"ts":"yesterday","user":"a"}`, `line 1: field "ts": time "yesterday": want RFC 3339`},
		{`{"ts":-1,"user":"a"}`, `line 1: field "ts": time "-1": negative`},
		{`{"ts":1,"user":"a"`, `line 1: malformed JSON: object not closed`},
		{`["ts",1]`, `line 1: not a JSON object`},
		{`{"ts":1,"user":"a"} x`, `line 1: malformed JSON: text after the object`},
		{"{\"ts\":2,\"user\":\"a\"}\n{\"ts\":1,\"user\":\"a\"}", `line 2: field "ts": time 1 is earlier than the previous line's`},
		{`{"ts":1,"user":null}`, `line 1: field "user": key null: want a string or a number`},
	} {
		r, _ := NewReader(strings.NewReader(tc.log), f)
		var err error
		for err == nil {
			_, err = r.Read()
		}
		var le *replay.LineError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want a line error containing %q", tc.log, err, tc.want)
		}
	}
}

// TestJSONLExponents: the time field may be any JSON number, exponents
// included, read exactly (no floating point) to the nanosecond.
func TestJSONLExponents(t *testing.T) {
	f := Format{JSONL: true, TimeField: "ts", KeyField: "user"}
	for _, tc := range []struct {
		ts   string
		want int64 // nanoseconds, or -1 for an error
		err  string
	}{
		{`1e3`, 1000e9, ""},
		{`1E3`, 1000e9, ""},
		{`1e+3`, 1000e9, ""},
		{`1.5e-3`, 1.5e6, ""},
		{`1.5E+2`, 150e9, ""},
		{`0e7`, 0, ""},
		{`0.0e-400`, 0, ""},
		{`0.000000001e9`, 1e9, ""},
		{`123456789e-9`, 123456789, ""},
		{`1e-9`, 1, ""},
		{`17672256001234567890e-10`, 1767225600123456789, ""}, // beyond a float64's precision
		{`1767225600.123456789e0`, 1767225600123456789, ""},
		{`1.7672256001234567890E9`, 1767225600123456789, ""},
		{`"1e3"`, 1000e9, ""},
		{`1.5`, 1.5e9, ""},
		{`1e-10`, -1, "more than 9 digits after the decimal point"},
		{`1.0000000001e0`, -1, "more than 9 digits after the decimal point"},
		{`1e30`, -1, "later than the latest supported offset"},
		{`1e999999999999`, -1, "later than the latest supported offset"},
		{`1e-999999999999`, -1, "more than 9 digits"},
		{`-1e3`, -1, "negative"},
		{`1e`, -1, "not a JSON number"},
		{`1e+`, -1, "not a JSON number"},
		{`01e3`, -1, "not a JSON number"},
		{`1.e3`, -1, "not a JSON number"},
		{`.5e1`, -1, "not a JSON number"},
		{`1e3.5`, -1, "not a JSON number"},
	} {
		r, _ := NewReader(strings.NewReader(`{"ts":`+tc.ts+`,"user":"a"}`), f)
		q, err := r.Read()
		switch {
		case tc.want >= 0 && (err != nil || q.At != tc.want):
			t.Errorf("%s: at %d, error %v; want %d", tc.ts, q.At, err, tc.want)
		case tc.want < 0 && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: at %d, error %v; want an error containing %q", tc.ts, q.At, err, tc.err)
		}
	}
}

func TestYAMLLoads(t *testing.T) {
	for _, alg := range sluice.Algorithms() {
		p := sluice.Policy{Name: "calibrated", Algorithm: alg, Limit: 12, Period: 1500 * time.Millisecond}
		if alg.IsBucket() {
			p.Burst = 30
		}
		var b bytes.Buffer
		if err := WriteYAML(&b, p, Rule{Domain: "api", Key: "user", Shadow: true}); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(fstest.MapFS{"calibrated.yaml": {Data: b.Bytes()}})
		if err != nil {
			t.Fatalf("%s:\n%s\n%v", alg, b.String(), err)
		}
		r := c.Match("api", []config.Entry{{Key: "user", Value: "ann"}})
		if r == nil {
			t.Fatalf("%s: no rule matches user=ann", alg)
		}
		got := r.Policy
		got.Name = p.Name
		if got != p || !r.ShadowMode {
			t.Errorf("%s: loaded %v shadow %v, want %v shadow true", alg, got, r.ShadowMode, p)
		}
	}
}

func TestParseShare(t *testing.T) {
	for s, want := range map[string]int64{"99.9%": 999_000_000, "0.999": 999_000_000, "100%": Billion, "1": Billion, "0.5%": 5_000_000} {
		if got, err := ParseShare(s); err != nil || got != want {
			t.Errorf("ParseShare(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"0", "101%", "1.5", "x", "-1%"} {
		if _, err := ParseShare(s); err == nil {
			t.Errorf("ParseShare(%q): no error", s)
		}
	}
}

// TestShareBareNumberIsAFraction checks that a bare share above 1 is
// explained as a fraction, with the percentage it may have meant.
func TestShareBareNumberIsAFraction(t *testing.T) {
	for s, want := range map[string]string{
		"50":   `share "50": a bare number is a fraction of the keys (0.999 is 99.9%), at most 1; for 50 percent write 50%`,
		"99.9": `for 99.9 percent write 99.9%`,
		"1.5":  `for 1.5 percent write 1.5%`,
		"150":  `share "150": a bare number is a fraction of the keys (0.999 is 99.9%): must be more than 0 and at most 1`,
		"120%": `share "120%": must be more than 0 and at most 100%`,
		"0":    `share "0": must be more than 0 and at most 100%`,
	} {
		if _, err := ParseShare(s); err == nil || err.Error() != want && !strings.HasSuffix(err.Error(), want) {
			t.Errorf("ParseShare(%q) = %v, want an error ending %q", s, err, want)
		}
	}
}

func TestMustKeep(t *testing.T) {
	for _, tc := range []struct {
		keep int64
		keys int
		want int64
	}{{999_000_000, 1000, 999}, {900_000_000, 10, 9}, {999_000_000, 1001, 1000}, {Billion, 7, 7}, {1, 5, 1}} {
		if got := mustKeep(tc.keep, tc.keys); got != tc.want {
			t.Errorf("mustKeep(%d, %d) = %d, want %d", tc.keep, tc.keys, got, tc.want)
		}
	}
}

// TestMemoryBoundedByKeys checks the package doc's memory bound where it
// can be seen: doubling the lines of a trace with the same keys adds (next
// to) no allocations, so nothing is kept per line.
func TestMemoryBoundedByKeys(t *testing.T) {
	lines := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s k%d\n", replay.AppendSeconds(nil, time.Duration(i)*time.Millisecond), i%50)
		}
		return b.String()
	}
	short, long := lines(20_000), lines(40_000)
	for _, alg := range []sluice.Algorithm{sluice.TokenBucket, sluice.FixedWindow, sluice.SlidingWindow, sluice.SlidingLog} {
		allocs := func(trace string) float64 {
			return testing.AllocsPerRun(2, func() {
				if _, err := Calibrate(context.Background(), source(trace, Format{}), Config{Algorithm: alg}); err != nil {
					t.Fatal(err)
				}
			})
		}
		a, b := allocs(short), allocs(long)
		if b-a > 20_000/100 {
			t.Errorf("%s: %v allocations for 20000 lines, %v for 40000: memory grows with lines", alg, a, b)
		}
	}
}
