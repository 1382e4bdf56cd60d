// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// replay runs trace through p on a fresh model store and returns the output.
func replay(t *testing.T, p sluice.Policy, trace string) (string, error) {
	t.Helper()
	c := new(Clock)
	var out bytes.Buffer
	err := Run(context.Background(), Config{Policy: p, Store: newModelStore(c), SetTime: c.Set}, strings.NewReader(trace), &out)
	return out.String(), err
}

func TestRunOutput(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy sluice.Policy
		trace  string
		want   string
	}{{
		name:   "rider app open",
		policy: sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 10},
		trace:  "0 rider\n0 rider\n0 rider\n0 rider\n0 rider\n0 rider\n0.1 rider\n0.2 rider\n",
		want: `{"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":9,"reset_after":0.2}
{"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":8,"reset_after":0.4}
{"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":7,"reset_after":0.6}
{"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":6,"reset_after":0.8}
{"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":5,"reset_after":1}
{"t":0,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":4,"reset_after":1.2}
{"t":0.1,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":3,"reset_after":1.3}
{"t":0.2,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":3,"reset_after":1.4}
`,
	}, {
		name:   "fixed-window rejection, impossible cost and peek",
		policy: sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute},
		trace:  "1 a\n2 a\n3.5 a\n4 a 3\n5 a 0\n60 a\n",
		want: `{"t":1,"key":"a","cost":1,"allowed":true,"limit":2,"remaining":1,"reset_after":59}
{"t":2,"key":"a","cost":1,"allowed":true,"limit":2,"remaining":0,"reset_after":58}
{"t":3.5,"key":"a","cost":1,"allowed":false,"limit":2,"remaining":0,"retry_after":56.5,"reset_after":56.5}
{"t":4,"key":"a","cost":3,"allowed":false,"impossible":true,"limit":2,"remaining":0,"reset_after":56}
{"t":5,"key":"a","cost":0,"allowed":false,"limit":2,"remaining":0,"retry_after":55,"reset_after":55}
{"t":60,"key":"a","cost":1,"allowed":true,"limit":2,"remaining":1,"reset_after":60}
`,
	}, {
		name:   "leaky-bucket delay",
		policy: sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 3, Period: time.Second, Burst: 2},
		trace:  "0 q\n0 q\n0 q\n0 q 3\n1 q\n",
		want: `{"t":0,"key":"q","cost":1,"allowed":true,"limit":3,"remaining":1,"reset_after":0.333333334,"delay":0}
{"t":0,"key":"q","cost":1,"allowed":true,"limit":3,"remaining":0,"reset_after":0.666666667,"delay":0.333333334}
{"t":0,"key":"q","cost":1,"allowed":false,"limit":3,"remaining":0,"retry_after":0.333333334,"reset_after":0.666666667}
{"t":0,"key":"q","cost":3,"allowed":false,"impossible":true,"limit":3,"remaining":0,"reset_after":0.666666667}
{"t":1,"key":"q","cost":1,"allowed":true,"limit":3,"remaining":1,"reset_after":0.333333334,"delay":0}
`,
	}, {
		name:   "keys are separate and escaped",
		policy: sluice.Policy{Algorithm: sluice.SlidingLog, Limit: 1, Period: time.Second},
		trace:  "0 \"a\\\"\n0 \"a\\\"\n0.5 b\u2028\x01\xff\n",
		want: `{"t":0,"key":"\"a\\\"","cost":1,"allowed":true,"limit":1,"remaining":0,"reset_after":1}
{"t":0,"key":"\"a\\\"","cost":1,"allowed":false,"limit":1,"remaining":0,"retry_after":1,"reset_after":1}
{"t":0.5,"key":"b\u2028\u0001\ufffd","key_quoted":"\"b\\u2028\\x01\\xff\"","cost":1,"allowed":true,"limit":1,"remaining":0,"reset_after":1}
`,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := replay(t, tt.policy, tt.trace)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("output:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestRunWritesLinesBeforeABadOne(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	out, err := replay(t, p, "0 a\n1 a\n\n0.5 a\n2 a\n")
	var le *LineError
	if !errors.As(err, &le) || le.Line != 4 {
		t.Fatalf("Run = %v, want a *LineError for line 4", err)
	}
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("wrote %d lines before the bad one, want 2:\n%s", n, out)
	}
}

func TestRunSetsTheClockBeforeEachTake(t *testing.T) {
	c := new(Clock)
	var seen []time.Time
	store := storeFunc(func(p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
		seen = append(seen, c.Now())
		return sluice.Decision{Allowed: true, Limit: p.Limit}, nil
	})
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}
	err := Run(context.Background(), Config{Policy: p, Store: store, SetTime: c.Set}, strings.NewReader("0 a\n0.000000001 a\n3600.5 a\n"), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{time.Unix(0, 0), time.Unix(0, 1), time.Unix(3600, 5e8)}
	if len(seen) != len(want) {
		t.Fatalf("store saw %v, want %v", seen, want)
	}
	for i := range want {
		if !seen[i].Equal(want[i]) {
			t.Errorf("request %d taken at %v, want %v", i, seen[i], want[i])
		}
	}
}

func TestRunStoreError(t *testing.T) {
	boom := errors.New("boom")
	store := storeFunc(func(sluice.Policy, string, int64) (sluice.Decision, error) { return sluice.Decision{}, boom })
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}
	err := Run(context.Background(), Config{Policy: p, Store: store}, strings.NewReader("\n0 a\n"), new(bytes.Buffer))
	var le *LineError
	if !errors.Is(err, boom) || !errors.As(err, &le) || le.Line != 2 {
		t.Errorf("Run = %v, want a *LineError for line 2 wrapping %v", err, boom)
	}
}

func TestRunBadConfig(t *testing.T) {
	good := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"invalid policy", Config{Policy: sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 0, Period: time.Second}, Store: newModelStore(new(Clock))}, "limit 0"},
		{"no store", Config{Policy: good}, "no store"},
	} {
		err := Run(context.Background(), tt.cfg, strings.NewReader("0 a\n"), new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Run = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

func TestRunCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}
	c := new(Clock)
	var out bytes.Buffer
	err := Run(ctx, Config{Policy: p, Store: newModelStore(c), SetTime: c.Set}, strings.NewReader("0 a\n"), &out)
	if !errors.Is(err, context.Canceled) || out.Len() != 0 {
		t.Errorf("Run on a cancelled context = %v with output %q, want context.Canceled and no output", err, out.String())
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestRunWriteError(t *testing.T) {
	boom := errors.New("disk full")
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}
	c := new(Clock)
	for _, lines := range []int{1, 10000} { // flushed at the end, or while running
		trace := strings.Repeat("0 a\n", lines)
		err := Run(context.Background(), Config{Policy: p, Store: newModelStore(c), SetTime: c.Set}, strings.NewReader(trace), failingWriter{boom})
		if !errors.Is(err, boom) {
			t.Errorf("%d lines: Run = %v, want it to wrap %v", lines, err, boom)
		}
	}
}

func TestRunAllocations(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Second}
	allocs := func(lines int) float64 {
		var sb strings.Builder
		for i := range lines {
			fmt.Fprintf(&sb, "%d.%03d key-%d\n", i/1000, i%1000, i%2)
		}
		trace := sb.String()
		c := new(Clock)
		store := newModelStore(c)
		return testing.AllocsPerRun(5, func() {
			if err := Run(context.Background(), Config{Policy: p, Store: store, SetTime: c.Set}, strings.NewReader(trace), discard{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(1000), allocs(3000)
	// Two keys, interned: nothing is allocated per line.
	if perLine := (large - small) / 2000; perLine > 0.01 {
		t.Errorf("Run allocates %.3f times per line, want 0", perLine)
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// TestAppendStringMatchesEncodingJSON checks the key escaper against
// encoding/json: both must decode to the same string.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "rider", `"`, `\`, "a\"b\\c", "\x00\x01\x1f\x7f", "\t\n\r\b\f",
		"<&>", "é", "日本", "🙂", "\u2028\u2029", "\xff", "a\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	} {
		checkJSONString(t, s)
	}
}

func checkJSONString(t *testing.T, s string) {
	t.Helper()
	got := appendString(nil, s)
	var fromOurs, fromJSON string
	if err := json.Unmarshal(got, &fromOurs); err != nil {
		t.Fatalf("appendString(%q) = %s: not a JSON string: %v", s, got, err)
	}
	want, _ := json.Marshal(s)
	if err := json.Unmarshal(want, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if fromOurs != fromJSON {
		t.Errorf("appendString(%q) = %s decodes to %q; encoding/json's %s decodes to %q", s, got, fromOurs, want, fromJSON)
	}
	if bytes.ContainsAny(got, "\u2028\u2029") {
		t.Errorf("appendString(%q) = %s: U+2028 and U+2029 must be escaped", s, got)
	}
}

func BenchmarkRun(b *testing.B) {
	var sb strings.Builder
	const lines = 100000
	for i := range lines {
		fmt.Fprintf(&sb, "%d.%06d user-%d %d\n", i/1000, (i%1000)*1000, i%100, 1+i%3)
	}
	trace := sb.String()
	p := sluice.Policy{Algorithm: sluice.SlidingWindow, Limit: 1000, Period: time.Minute}
	b.ReportAllocs()
	b.SetBytes(int64(len(trace)))
	for b.Loop() {
		c := new(Clock)
		if err := Run(context.Background(), Config{Policy: p, Store: newModelStore(c), SetTime: c.Set}, strings.NewReader(trace), discard{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
}

// storeFunc is a sluice.Store made of a function.
type storeFunc func(p sluice.Policy, key string, cost int64) (sluice.Decision, error)

func (f storeFunc) Take(_ context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	return f(p, key, cost)
}

func (f storeFunc) TakeAll(context.Context, []sluice.Request, []sluice.Decision) error {
	return errors.New("storeFunc: TakeAll is not implemented")
}

// TestInvalidUTF8KeysDistinct: keys that differ only in bytes that are not
// valid UTF-8 both print as U+FFFD in "key", and "key_quoted" tells them
// apart; a valid key has no "key_quoted".
func TestInvalidUTF8KeysDistinct(t *testing.T) {
	var got []string
	for _, k := range []string{"a\xff", "a\xfe", "a\ufffd", "ok"} {
		rec := appendRecord(nil, Request{Key: k, Cost: 1}, sluice.Decision{Allowed: true, Limit: 1}, false)
		var r map[string]any
		if err := json.Unmarshal(rec, &r); err != nil {
			t.Fatalf("%s: %v", rec, err)
		}
		got = append(got, fmt.Sprintf("%v|%v", r["key"], r["key_quoted"]))
	}
	want := []string{"a\ufffd|\"a\\xff\"", "a\ufffd|\"a\\xfe\"", "a\ufffd|<nil>", "ok|<nil>"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func (f storeFunc) Reset(context.Context, sluice.Policy, string) error { return nil }

func (f storeFunc) Close() error { return nil }
