// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay"
)

// readAll reads every request of a testdata file, as "LINE +SECONDS KEY"
// with the time relative to the first request's.
func readAll(t *testing.T, file string, f Format) ([]string, time.Duration) {
	t.Helper()
	fh, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := NewReader(fh, f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	first := int64(-1)
	for {
		q, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if first < 0 {
			first = q.At
		}
		out = append(out, fmt.Sprintf("%d +%s %s", q.Line, replay.AppendSeconds(nil, time.Duration(q.At-first)), q.Key))
	}
	var res time.Duration
	if rr, ok := r.(interface{ Resolution() time.Duration }); ok {
		res = rr.Resolution()
	}
	return out, res
}

func TestAccessLogs(t *testing.T) {
	timed := `$remote_addr [$time_local] "$request" $status $request_time $msec "$http_x_api_key"`
	for _, c := range []struct {
		file string
		f    Format
		want []string
		res  time.Duration
	}{
		{"nginx-combined.log", Format{Log: "combined"}, []string{"1 +0 192.0.2.10", "2 +0 192.0.2.10", "3 +1 198.51.100.7", "5 +2 192.0.2.10", "6 +4 203.0.113.5"}, time.Second},
		{"nginx-combined.log", Format{Log: "combined", Key: "user"}, []string{"1 +0 -", "2 +0 -", "3 +1 alice", "5 +2 -", "6 +4 -"}, time.Second},
		{"nginx-combined.log", Format{Log: "combined", Key: "path"}, []string{"1 +0 /v1/rides", "2 +0 /v1/rides", "3 +1 /v1/trips", "5 +2 /v1/rides", "6 +4 /healthz"}, time.Second},
		{"nginx-combined.log", Format{Log: "combined", Key: "header:User-Agent"}, []string{"1 +0 rider-app/4.2", "2 +0 rider-app/4.2", "3 +1 Mozilla/5.0 (X11; Linux x86_64)", "5 +2 rider-app/4.2", "6 +4 kube-probe/1.30"}, time.Second},
		// A common-format reader reads combined lines (later fields ignored).
		{"nginx-combined.log", Format{Log: "common"}, []string{"1 +0 192.0.2.10", "2 +0 192.0.2.10", "3 +1 198.51.100.7", "5 +2 192.0.2.10", "6 +4 203.0.113.5"}, time.Second},
		{"apache-common.log", Format{Log: "common", Key: "field:request"}, []string{`1 +0 GET /apache_pb.gif HTTP/1.0`, `2 +1 GET /search?q=\"quoted\" HTTP/1.0`}, time.Second},
		// $msec is the time (to the millisecond); $request_time before it
		// is the arrival, which reorders the slow request first.
		{"nginx-timed.log", Format{Log: timed}, []string{"2 +0 192.0.2.11", "1 +0.45 192.0.2.10", "3 +0.55 192.0.2.10"}, time.Millisecond},
		{"nginx-timed.log", Format{Log: timed, Key: "header:x-api-key"}, []string{"2 +0 key-b", "1 +0.45 key-a", "3 +0.55 key-a"}, time.Millisecond},
		// Envoy's default format: the client is the first X-Forwarded-For.
		{"envoy-default.log", Format{Log: "envoy"}, []string{"1 +0 192.0.2.10", "2 +0.01 192.0.2.10", "3 +0.49 198.51.100.7"}, time.Millisecond},
		{"envoy-default.log", Format{Log: "envoy", Key: "header::authority"}, nil, 0},
		{"envoy-default.log", Format{Log: "envoy", Key: "header:host"}, []string{"1 +0 api.example.com", "2 +0.01 api.example.com", "3 +0.49 api.example.com"}, time.Millisecond},
		// Envoy's JSON access log: the peer address without its port.
		{"envoy.jsonl", Format{JSONL: true, TimeField: "start_time", KeyField: "downstream_remote_address", Key: "ip"}, []string{"1 +0 192.0.2.10", "2 +0.01 192.0.2.10", "3 +0.49 2001:db8::7"}, 0},
		{"envoy.jsonl", Format{JSONL: true, TimeField: "start_time", KeyField: "x_api_key"}, []string{"1 +0 key-a", "2 +0.01 key-a", "3 +0.49 key-b"}, 0},
	} {
		name := fmt.Sprintf("%s %+v", c.file, c.f)
		if c.want == nil { // a key the format does not have
			if _, err := NewReader(strings.NewReader(""), c.f); err == nil {
				t.Errorf("%s: no error", name)
			}
			continue
		}
		got, res := readAll(t, c.file, c.f)
		if fmt.Sprint(got) != fmt.Sprint(c.want) || res != c.res {
			t.Errorf("%s:\n got %q (resolution %v)\nwant %q (resolution %v)", name, got, res, c.want, c.res)
		}
	}
}

func TestAccessLogErrors(t *testing.T) {
	for _, c := range []struct {
		log, format, key, want string
	}{
		{"192.0.2.1 - - [26/Nov/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 1\nnot a log line\n", "common", "", `line 2: does not match the log format: no " [" after $remote_user`},
		{"192.0.2.1 - - [26/Nov/2026 10:00:00] \"GET / HTTP/1.1\" 200 1\n", "common", "", `line 1: $time_local: "26/Nov/2026 10:00:00"`},
		{"", "$remote_addr $status", "", "has no time"},
		{"", "apache", "", "want common, combined, envoy or an nginx log_format"},
		{"", "combined", "header:x-api-key", "the log format has no $http_x_api_key"},
		{"", "combined", "port", `--key "port": want ip, user, path, header:NAME or field:NAME`},
		{"", "$remote_addr$status", "", "follows another variable"},
	} {
		r, err := NewReader(strings.NewReader(c.log), Format{Log: c.format, Key: c.key})
		for err == nil {
			_, err = r.Read()
		}
		if errors.Is(err, io.EOF) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q as %q key %q: %v, want an error containing %q", c.log, c.format, c.key, err, c.want)
		}
	}
}

// A request that started more than the reorder horizon before the latest
// line read is placed at the latest time given out: times never go back.
func TestAccessLogReorderHorizon(t *testing.T) {
	log := `192.0.2.1 [26/Nov/2026:10:00:00 +0000] 0.000
192.0.2.2 [26/Nov/2026:10:02:00 +0000] 0.000
192.0.2.3 [26/Nov/2026:10:02:01 +0000] 90.000
192.0.2.4 [26/Nov/2026:10:02:02 +0000] 151.000
`
	r, err := NewReader(strings.NewReader(log), Format{Log: "$remote_addr [$time_local] $request_time"})
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
		got = append(got, fmt.Sprintf("%s@%s", q.Key, time.Unix(0, q.At).UTC().Format("15:04:05")))
	}
	// .3 arrived at 10:00:31, after .1 was given out (10:00:00) but
	// before .2: it goes where it belongs, as it is within the horizon of
	// what was still pending. .4 arrived at 09:59:31, before .1 and .3
	// were given out: it is placed at .3's time.
	want := "[192.0.2.1@10:00:00 192.0.2.3@10:00:31 192.0.2.4@10:00:31 192.0.2.2@10:02:00]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

// Calibrate reads an access log end to end, and warns that $time_local is
// as coarse as a one-second period.
func TestCalibrateAccessLog(t *testing.T) {
	src := func() (Reader, io.Closer, error) {
		fh, err := os.Open(filepath.Join("testdata", "nginx-combined.log"))
		if err != nil {
			return nil, nil, err
		}
		r, err := NewReader(fh, Format{Log: "combined"})
		return r, fh, err
	}
	rep, err := Calibrate(context.Background(), src, Config{Algorithm: sluice.FixedWindow, Keep: Billion})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 5 || rep.Keys != 3 || rep.Policy.Limit != 2 || rep.Resolution != time.Second {
		t.Errorf("requests %d keys %d policy %v resolution %v; want 5, 3, limit 2, 1s", rep.Requests, rep.Keys, rep.Policy, rep.Resolution)
	}
	var b strings.Builder
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "the times are in whole multiples of 1s, not finer than the 1s period") {
		t.Errorf("no resolution note:\n%s", b.String())
	}
}

// Any line, in any named format, is read or refused with a line error,
// and the times given out never go back.
func FuzzAccessLog(f *testing.F) {
	for _, file := range []string{"nginx-combined.log", "apache-common.log", "envoy-default.log"} {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), "combined")
		f.Add(string(b), "envoy")
	}
	f.Add("1 [26/Nov/2026:10:00:00 +0000] 0.5\n2 [26/Nov/2026:10:00:00 +0000] -\n", "$remote_addr [$time_local] $request_time")
	f.Fuzz(func(t *testing.T, log, format string) {
		r, err := NewReader(strings.NewReader(log), Format{Log: format})
		if err != nil {
			return
		}
		last := int64(-1 << 63)
		for {
			q, err := r.Read()
			if err == io.EOF {
				return
			}
			if err != nil {
				var le *replay.LineError
				if !errors.As(err, &le) {
					t.Fatalf("error %v is not a line error", err)
				}
				return
			}
			if q.At < last {
				t.Fatalf("time went back: %d after %d", q.At, last)
			}
			last = q.At
		}
	})
}

// TestAccessLogOutOfOrder checks that a text log line whose own time is
// more than the reorder horizon behind the latest line's (rotated files
// concatenated newest first) is an error naming the line and both times,
// as for a trace; disorder within the horizon is absorbed.
func TestAccessLogOutOfOrder(t *testing.T) {
	line := func(ts string) string {
		return "192.0.2.10 - - [" + ts + " +0000] \"GET /v1/rides HTTP/1.1\" 200 512 \"-\" \"app\"\n"
	}
	within := line("26/Nov/2026:10:00:00") + line("26/Nov/2026:10:01:00") + line("26/Nov/2026:10:00:00")
	r, err := NewReader(strings.NewReader(within), Format{Log: "combined"})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; ; n++ {
		if _, err := r.Read(); err == io.EOF {
			if n != 3 {
				t.Errorf("read %d requests, want 3", n)
			}
			break
		} else if err != nil {
			t.Fatalf("a line one horizon (%v) back: %v", reorderHorizon, err)
		}
	}
	var b strings.Builder
	b.WriteString(line("26/Nov/2026:10:00:00"))
	b.WriteString(line("26/Nov/2026:10:59:50"))
	b.WriteString(line("25/Nov/2026:10:00:00"))
	_, err = Calibrate(context.Background(), source(b.String(), Format{Log: "combined"}), Config{Algorithm: sluice.TokenBucket})
	want := "line 3: $time_local 2026-11-25T10:00:00Z is 24h59m50s earlier than line 2's, 2026-11-26T10:59:50Z: the log must be in time order"
	var le *replay.LineError
	if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &le) || le.Line != 3 {
		t.Errorf("got %v, want a line error containing %q", err, want)
	}
}
