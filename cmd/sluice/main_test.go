// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runSluice runs the command line with stdin and returns the exit status and
// the output.
func runSluice(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// decision is one output line of sluice replay. Optional fields are
// pointers, so a test can tell absent from zero.
type decision struct {
	T          json.Number `json:"t"`
	Key        string      `json:"key"`
	Cost       int64       `json:"cost"`
	Allowed    bool        `json:"allowed"`
	Impossible bool        `json:"impossible"`
	Limit      int64       `json:"limit"`
	Remaining  int64       `json:"remaining"`
	RetryAfter *string     `json:"-"`
	ResetAfter json.Number `json:"reset_after"`
	Delay      *string     `json:"-"`
}

// decode parses replay output strictly: one JSON object per line, no
// unknown fields.
func decode(t *testing.T, out string) []decision {
	t.Helper()
	var ds []decision
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			if out == "" {
				return nil
			}
			t.Fatalf("output line %d is empty", i+1)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatalf("output line %d: %v: %s", i+1, err, line)
		}
		opt := func(name string) *string {
			if v, ok := raw[name]; ok {
				delete(raw, name)
				s := string(v)
				return &s
			}
			return nil
		}
		d := decision{RetryAfter: opt("retry_after"), Delay: opt("delay")}
		rest, _ := json.Marshal(raw)
		dec := json.NewDecoder(bytes.NewReader(rest))
		dec.DisallowUnknownFields()
		dec.UseNumber()
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("output line %d: %v: %s", i+1, err, line)
		}
		ds = append(ds, d)
	}
	return ds
}

// replayExample replays a trace of examples/ and checks that it succeeds
// silently.
func replayExample(t *testing.T, trace string, flags ...string) []decision {
	t.Helper()
	args := append([]string{"replay"}, flags...)
	args = append(args, filepath.Join("..", "..", "examples", trace))
	code, out, errOut := runSluice(t, "", args...)
	if code != 0 || errOut != "" {
		t.Fatalf("sluice %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
	}
	return decode(t, out)
}

func TestExampleRider(t *testing.T) {
	ds := replayExample(t, "rider.trace", "--algorithm", "token-bucket", "--limit", "5", "--period", "1s", "--burst", "10")
	var remaining []int64
	for _, d := range ds {
		if !d.Allowed || d.Key != "rider" || d.Cost != 1 || d.Limit != 5 || d.RetryAfter != nil || d.Delay != nil {
			t.Errorf("unexpected decision %+v", d)
		}
		remaining = append(remaining, d.Remaining)
	}
	if want := []int64{9, 8, 7, 6, 5, 4, 3, 3}; !slices.Equal(remaining, want) {
		t.Errorf("remaining %v, want %v", remaining, want)
	}
	if last := ds[len(ds)-1]; last.T != "0.2" || last.ResetAfter != "1.4" {
		t.Errorf("last decision at t=%s resets after %s, want t=0.2 and 1.4", last.T, last.ResetAfter)
	}
}

func TestExampleBoundary(t *testing.T) {
	for _, tt := range []struct {
		alg  string
		want int
	}{
		{"fixed-window", 200},
		{"sliding-log", 100},
		{"sliding-window", 100},
		{"token-bucket", 101},
		{"gcra", 101},
	} {
		t.Run(tt.alg, func(t *testing.T) {
			ds := replayExample(t, "boundary.trace", "--algorithm", tt.alg, "--limit", "100", "--period", "1m")
			if len(ds) != 200 {
				t.Fatalf("%d decisions, want 200", len(ds))
			}
			admitted := 0
			for _, d := range ds {
				if d.Allowed {
					admitted++
				} else if d.RetryAfter == nil || d.Impossible {
					t.Errorf("rejection without retry_after: %+v", d)
				}
			}
			if admitted != tt.want {
				t.Errorf("admitted %d, want %d", admitted, tt.want)
			}
		})
	}
}

func TestExampleWeighted(t *testing.T) {
	ds := replayExample(t, "weighted.trace", "--algorithm", "sliding-window", "--limit", "50", "--period", "1m")
	if len(ds) != 62 {
		t.Fatalf("%d decisions, want 62", len(ds))
	}
	for i, d := range ds[:60] {
		if !d.Allowed {
			t.Errorf("request %d rejected: %+v", i+1, d)
		}
	}
	rejected, next := ds[60], ds[61]
	if rejected.Allowed || rejected.T != "75" || rejected.RetryAfter == nil || *rejected.RetryAfter != "0.714285715" {
		t.Errorf("61st request: %+v (retry_after %v), want rejected at 75 with retry_after 0.714285715", rejected, rejected.RetryAfter)
	}
	if !next.Allowed || next.T != "76" || next.Remaining != 0 {
		t.Errorf("62nd request: %+v, want admitted at 76 with remaining 0", next)
	}
}

func TestExampleGPS(t *testing.T) {
	ds := replayExample(t, "gps.trace", "--algorithm", "leaky-bucket", "--limit", "3000", "--period", "1s", "--burst", "5000")
	admitted := map[json.Number]int64{}
	var dropped int64
	for _, d := range ds {
		if d.Allowed {
			admitted[d.T] += d.Cost
			if d.Delay == nil {
				t.Errorf("admitted without a delay: %+v", d)
			}
		} else {
			dropped += d.Cost
			if d.Delay != nil || d.RetryAfter == nil {
				t.Errorf("rejection with a delay or without retry_after: %+v", d)
			}
		}
	}
	want := map[json.Number]int64{"0": 4000, "1": 2500, "2": 3200, "3": 4300}
	if len(admitted) != len(want) || dropped != 1700 {
		t.Errorf("admitted %v and dropped %d, want %v and 1700", admitted, dropped, want)
	}
	for at, n := range want {
		if admitted[at] != n {
			t.Errorf("admitted %d at t=%s, want %d", admitted[at], at, n)
		}
	}
	for _, d := range ds {
		if d.T == "1" {
			if d.Delay == nil || *d.Delay != "0.333333334" {
				t.Errorf("first update at t=1 waits %v, want 0.333333334", d.Delay)
			}
			break
		}
	}
}

// TestEveryExampleIsTested keeps examples/ and the tests above in step.
func TestEveryExampleIsTested(t *testing.T) {
	traces, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.trace"))
	if err != nil {
		t.Fatal(err)
	}
	tested := []string{"boundary.trace", "gps.trace", "rider.trace", "weighted.trace"}
	var found []string
	for _, p := range traces {
		found = append(found, filepath.Base(p))
	}
	if !slices.Equal(found, tested) {
		t.Errorf("examples/ holds %v; the tests cover %v", found, tested)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "examples", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range found {
		if !bytes.Contains(readme, []byte("examples/"+name)) {
			t.Errorf("examples/README.md has no command for %s", name)
		}
	}
}

func TestReplayInput(t *testing.T) {
	const trace = "0 a\n0 a\n0 a\n"
	flags := []string{"--algorithm", "fixed-window", "--limit", "2", "--period", "1s"}
	file := filepath.Join(t.TempDir(), "t.trace")
	if err := os.WriteFile(file, []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"stdin", trace, append([]string{"replay"}, flags...)},
		{"dash is stdin", trace, append(append([]string{"replay"}, flags...), "-")},
		{"file", "", append(append([]string{"replay"}, flags...), file)},
		{"file before the flags", "", append([]string{"replay", file}, flags...)},
		{"file between the flags", "", append(append(append([]string{"replay"}, flags[:2]...), file), flags[2:]...)},
		{"file after --", "", append(append([]string{"replay"}, flags...), "--", file)},
		{"single-dash flags", trace, []string{"replay", "-algorithm=fixed-window", "-limit=2", "-period=1s"}},
		{"memory store", trace, append([]string{"replay", "--store", "memory"}, flags...)},
		{"mem:// store", trace, append([]string{"replay", "--store", "mem://"}, flags...)},
		{"memory:// store", trace, append([]string{"replay", "--store=memory://"}, flags...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runSluice(t, tt.stdin, tt.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			ds := decode(t, out)
			if len(ds) != 3 || !ds[0].Allowed || !ds[1].Allowed || ds[2].Allowed {
				t.Errorf("decisions %+v, want admitted, admitted, rejected", ds)
			}
		})
	}
}

func TestReplayErrors(t *testing.T) {
	tb := []string{"--algorithm", "token-bucket", "--limit", "5", "--period", "1s"}
	fw := []string{"--algorithm", "fixed-window", "--limit", "5", "--period", "1s"}
	with := func(base []string, more ...string) []string {
		return append(append([]string{"replay"}, base...), more...)
	}
	for _, tt := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		want   string // in the one stderr line
		lines  int    // decisions printed before the error
		absent string // must not appear on stderr
	}{
		// Flags.
		{name: "no algorithm", args: []string{"replay", "--limit", "5", "--period", "1s"}, code: 2, want: "--algorithm is required: one of token-bucket, gcra, leaky-bucket, fixed-window, sliding-log, sliding-window"},
		{name: "unknown algorithm", args: []string{"replay", "--algorithm", "leaky", "--limit", "5", "--period", "1s"}, code: 2, want: `--algorithm "leaky": unknown algorithm (want one of token-bucket, gcra, leaky-bucket, fixed-window, sliding-log, sliding-window)`},
		{name: "no limit", args: []string{"replay", "--algorithm", "gcra", "--period", "1s"}, code: 2, want: "--limit is required"},
		{name: "zero limit", args: []string{"replay", "--algorithm", "gcra", "--limit", "0", "--period", "1s"}, code: 2, want: "--limit 0: must be at least 1"},
		{name: "negative limit", args: []string{"replay", "--algorithm", "gcra", "--limit", "-3", "--period", "1s"}, code: 2, want: "--limit -3: must be at least 1"},
		{name: "malformed limit", args: []string{"replay", "--algorithm", "gcra", "--limit", "5.5", "--period", "1s"}, code: 2, want: `invalid value "5.5" for flag -limit`},
		{name: "huge limit", args: []string{"replay", "--algorithm", "gcra", "--limit", "4611686018427387905", "--period", "1s"}, code: 2, want: "invalid policy: limit 4611686018427387905: must be between 1 and"},
		{name: "no period", args: []string{"replay", "--algorithm", "gcra", "--limit", "5"}, code: 2, want: "--period is required"},
		{name: "zero period", args: []string{"replay", "--algorithm", "gcra", "--limit", "5", "--period", "0s"}, code: 2, want: "--period 0s: must be positive"},
		{name: "negative period", args: []string{"replay", "--algorithm", "gcra", "--limit", "5", "--period", "-1m"}, code: 2, want: "--period -1m0s: must be positive"},
		{name: "period without unit", args: []string{"replay", "--algorithm", "gcra", "--limit", "5", "--period", "60"}, code: 2, want: `--period "60": not a duration`},
		{name: "malformed period", args: []string{"replay", "--algorithm", "gcra", "--limit", "5", "--period", "soon"}, code: 2, want: `--period "soon": not a duration`},
		{name: "burst for fixed-window", args: with(fw, "--burst", "10"), code: 2, want: "--burst has no meaning for fixed-window"},
		{name: "burst for sliding-log", args: []string{"replay", "--algorithm", "sliding-log", "--limit", "5", "--period", "1s", "--burst", "5"}, code: 2, want: "--burst has no meaning for sliding-log"},
		{name: "burst for sliding-window", args: []string{"replay", "--burst", "1", "--algorithm", "sliding-window", "--limit", "5", "--period", "1s"}, code: 2, want: "--burst has no meaning for sliding-window"},
		{name: "zero burst", args: with(tb, "--burst", "0"), code: 2, want: "--burst 0: must be at least 1"},
		{name: "negative burst", args: with(tb, "--burst", "-1"), code: 2, want: "--burst -1: must be at least 1"},
		{name: "overflowing burst", args: []string{"replay", "--algorithm", "leaky-bucket", "--limit", "1", "--period", "24h", "--burst", "1000000"}, code: 2, want: "invalid policy: burst 1000000 with limit 1 per 24h0m0s"},
		{name: "unknown flag", args: with(tb, "--rate", "5"), code: 2, want: "flag provided but not defined: -rate"},
		{name: "two traces", args: with(tb, "a.trace", "b.trace"), code: 2, want: `unexpected argument "b.trace"`},
		{name: "malformed redis URL", args: with(tb, "--store", "redis://cache:6379/notadb"), code: 2, want: `--store "redis://cache:6379/notadb"`},
		{name: "malformed redis URL keeps its password", args: with(tb, "--store", "rediss://:hunter2@cache:6380/x"), code: 2, want: "--store", absent: "hunter2"},
		{name: "unknown store", args: with(tb, "--store", "memcached://cache"), code: 2, want: `--store "memcached://cache": unknown store`},
		{name: "unknown store keeps its password", args: with(tb, "--store", "http://me:hunter2@cache"), code: 2, want: "unknown store", absent: "hunter2"},
		{name: "missing trace file", args: with(tb, "no/such.trace"), code: 1, want: `trace "no/such.trace": no such file or directory`},

		// Trace lines: the decisions before the bad line are printed.
		{name: "malformed line", args: with(tb), stdin: "0 a\n0 a\nrider 0\n", code: 1, lines: 2, want: `line 3: time "rider": not a decimal number of seconds`},
		{name: "malformed time", args: with(tb), stdin: "0.1.2 a\n", code: 1, want: `line 1: time "0.1.2": not a decimal number of seconds`},
		{name: "negative time", args: with(tb), stdin: "-0.5 a\n", code: 1, want: `line 1: time "-0.5": negative`},
		{name: "too precise time", args: with(tb), stdin: "# ns\n0.0000000005 a\n", code: 1, want: "line 2: time \"0.0000000005\": more than 9 digits after the decimal point"},
		{name: "decreasing time", args: with(tb), stdin: "1 a\n\n2 b\n1.999999999 a\n", code: 1, lines: 2, want: "line 4: time 1.999999999 is earlier than the previous request's time 2"},
		{name: "negative cost", args: with(tb), stdin: "0 a\n0 a -1\n", code: 1, lines: 1, want: `line 2: cost "-1": negative`},
		{name: "malformed cost", args: with(tb), stdin: "0 a two\n", code: 1, want: `line 1: cost "two": not a non-negative integer`},
		{name: "too many fields", args: with(tb), stdin: "0 a 1 2\n", code: 1, want: `line 1: too many fields: want SECONDS KEY [COST], found a fourth field "2"`},
		{name: "missing key", args: with(tb), stdin: "0 a\n0\n", code: 1, lines: 1, want: "line 2: missing key"},
		{name: "binary garbage", args: with(tb), stdin: "\x00\xff\n", code: 1, want: "line 1: time"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runSluice(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if strings.Count(errOut, "\n") != 1 || !strings.HasSuffix(errOut, "\n") || !strings.HasPrefix(errOut, "sluice replay: ") {
				t.Errorf("stderr %q: want one line starting with \"sluice replay: \"", errOut)
			}
			if !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr %q: want it to contain %q", errOut, tt.want)
			}
			if tt.absent != "" && strings.Contains(errOut, tt.absent) {
				t.Errorf("stderr %q: must not contain %q", errOut, tt.absent)
			}
			if got := len(decode(t, out)); got != tt.lines {
				t.Errorf("%d decisions printed before the error, want %d", got, tt.lines)
			}
		})
	}
}

func TestCommands(t *testing.T) {
	for _, tt := range []struct {
		name       string
		args       []string
		code       int
		stdout     string // contained in stdout
		stderr     string // contained in stderr; "" means stderr is empty
		stderrLine bool   // stderr is exactly one line
	}{
		{name: "no command", args: nil, code: 2, stderr: "sluice <command> [arguments]"},
		{name: "help", args: []string{"help"}, code: 0, stdout: "\treplay    replay a traffic trace"},
		{name: "--help", args: []string{"--help"}, code: 0, stdout: "sluice <command> [arguments]"},
		{name: "-h", args: []string{"-h"}, code: 0, stdout: "sluice <command> [arguments]"},
		{name: "help replay", args: []string{"help", "replay"}, code: 0, stdout: "usage: sluice replay --algorithm ALG --limit N --period DURATION [--burst B] [--store URL] [TRACE]"},
		{name: "replay -h", args: []string{"replay", "-h"}, code: 0, stdout: "SECONDS KEY [COST]"},
		{name: "replay --help", args: []string{"replay", "--algorithm", "gcra", "--help"}, code: 0, stdout: "--burst B"},
		{name: "help version", args: []string{"help", "version"}, code: 0, stdout: "usage: sluice version"},
		{name: "help unknown", args: []string{"help", "frobnicate"}, code: 2, stderr: `sluice help: unknown command "frobnicate"`, stderrLine: true},
		{name: "help too many", args: []string{"help", "replay", "version"}, code: 2, stderr: "too many arguments", stderrLine: true},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: `sluice: unknown command "frobnicate" (run 'sluice help' for the list)`, stderrLine: true},
		{name: "version", args: []string{"version"}, code: 0, stdout: "sluice "},
		{name: "version with an argument", args: []string{"version", "x"}, code: 2, stderr: `unexpected argument "x"`, stderrLine: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runSluice(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if !strings.Contains(out, tt.stdout) {
				t.Errorf("stdout %q: want it to contain %q", out, tt.stdout)
			}
			if tt.stderr == "" && errOut != "" || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q: want %q", errOut, tt.stderr)
			}
			if tt.stderrLine && strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr %q: want exactly one line", errOut)
			}
		})
	}
}
