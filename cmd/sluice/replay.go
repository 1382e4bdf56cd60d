// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/replay"
)

const replayUsage = `usage: sluice replay --algorithm ALG --limit N --period DURATION [--burst B] [--store URL] [TRACE]

Replay replays a traffic trace through one policy on a virtual clock and
prints the decision for every request, to test a policy against real
traffic before deploying it.

Flags:

  --algorithm ALG    token-bucket, gcra, leaky-bucket, fixed-window,
                     sliding-log or sliding-window (required)
  --limit N          units admitted per period, at least 1 (required)
  --period DURATION  the window, or the time a bucket takes to refill
                     limit units: 1s, 1m, 500ms, 1h30m (required)
  --burst B          bucket capacity (leaky-bucket: queue size) for
                     token-bucket, gcra and leaky-bucket; default: limit
  --store URL        memory (also mem:// or memory://), the default; or a
                     Redis URL (redis://host:port/db, rediss://…, or
                     redis+cluster://h1:p1,h2:p2), replayed on the trace's
                     clock under a key prefix of the run's own

The trace is read from the TRACE file, or from standard input if TRACE is
absent or "-". It has one request per line, fields separated by spaces or
tabs:

  SECONDS KEY [COST]

SECONDS is the offset from the start of the trace in decimal seconds, exact
to the nanosecond (0, 59, 0.1, 1.000000001), and never decreases. KEY is any
text without spaces or tabs. COST is a whole number of units, default 1; 0
asks without taking. Blank lines and lines starting with # are skipped. The
trace starts at the Unix epoch, which is a window boundary for every period.

The output is one JSON object per request, in order, durations in seconds:

  {"t":0.1,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":3,"reset_after":1.3}

A rejection that waiting can turn into an admission adds "retry_after"; one
whose cost exceeds the capacity adds "impossible":true instead. An admitted
leaky-bucket request adds its "delay" in the queue.

A bad flag exits with status 2 and a bad trace line with status 1, each
with one line on standard error; decisions for the lines before a bad one
have been printed.
`

func runReplay(e env, args []string) int {
	const prefix = "sluice replay"
	fset := newFlagSet(prefix)
	pf := addPolicyFlags(fset)
	storeURL := fset.String("store", "memory", "")
	files, set, code, ok := parseCommand(e, fset, args, replayUsage)
	if !ok {
		return code
	}

	if len(files) > 1 {
		return e.fail(exitUsage, prefix, "unexpected argument %q: want at most one TRACE file", files[1])
	}
	p, err := pf.policy(set)
	if err != nil {
		return e.fail(exitUsage, prefix, "%v", err)
	}
	clock := new(replay.Clock)
	store, closeStore, err := openStore(*storeURL, clock)
	if err != nil {
		return e.fail(exitUsage, prefix, "%v", err)
	}
	defer closeStore()

	in := e.stdin
	if len(files) == 1 && files[0] != "-" {
		f, err := openTrace(files[0])
		if err != nil {
			return e.fail(exitFailure, prefix, "%v", err)
		}
		defer f.Close()
		in = f
	}

	err = replay.Run(context.Background(), replay.Config{Policy: p, Store: store, SetTime: clock.Set}, in, e.stdout)
	if err != nil {
		// The replay package's errors start with "replay: ".
		return e.fail(exitFailure, prefix, "%s", strings.TrimPrefix(err.Error(), "replay: "))
	}
	return exitOK
}

// parseInterspersed parses flags that may come before or after the
// positional arguments, which it returns; "--" ends the flags.
func parseInterspersed(fset *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fset.Parse(args); err != nil {
			return nil, err
		}
		rest := fset.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// replayPolicy checks the policy flags, naming the flag at fault, and
// returns the policy.
func replayPolicy(set map[string]bool, alg string, limit int64, period string, burst int64) (sluice.Policy, error) {
	var p sluice.Policy
	if !set["algorithm"] {
		return p, fmt.Errorf("--algorithm is required: one of %s", algorithmNames())
	}
	a, err := sluice.ParseAlgorithm(alg)
	if err != nil {
		return p, fmt.Errorf("--algorithm %q: unknown algorithm (want one of %s)", alg, algorithmNames())
	}
	if !set["limit"] {
		return p, errors.New("--limit is required: the units admitted per period")
	}
	if limit < 1 {
		return p, fmt.Errorf("--limit %d: must be at least 1", limit)
	}
	if !set["period"] {
		return p, errors.New("--period is required: a duration such as 1s, 1m or 500ms")
	}
	d, err := time.ParseDuration(period)
	if err != nil {
		return p, fmt.Errorf("--period %q: not a duration (want one such as 1s, 1m or 500ms)", period)
	}
	if d <= 0 {
		return p, fmt.Errorf("--period %v: must be positive", d)
	}
	if set["burst"] {
		if !a.IsBucket() {
			return p, fmt.Errorf("--burst has no meaning for %s (only for token-bucket, gcra and leaky-bucket)", a)
		}
		if burst < 1 {
			return p, fmt.Errorf("--burst %d: must be at least 1", burst)
		}
	}
	p = sluice.Policy{Algorithm: a, Limit: limit, Period: d, Burst: burst}
	if err := p.Validate(); err != nil {
		// Validate names the field and value; drop its "policy" prefix.
		return p, fmt.Errorf("invalid policy: %s", strings.TrimPrefix(err.Error(), `sluice: policy "": `))
	}
	return p, nil
}

func algorithmNames() string {
	names := make([]string, len(sluice.Algorithms()))
	for i, a := range sluice.Algorithms() {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// openStore returns the store that --store names, on clock, and a function
// that closes it.
func openStore(raw string, clock clock.Clock) (sluice.Store, func() error, error) {
	switch raw {
	case "memory", "mem://", "memory://":
		// No background sweeper: it would run on wall-clock ticks, and
		// keys expire exactly when touched anyway.
		s := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
		return s, s.Close, nil
	}
	u, err := url.Parse(raw)
	if err == nil {
		switch strings.ToLower(u.Scheme) {
		case "redis", "rediss", "redis+cluster", "rediss+cluster":
			// The trace's clock, a prefix of this run's own so that
			// runs never see each other's keys, and a generous timeout:
			// a replay wants every answer, not a fast failure.
			s, err := redisstore.Open(raw,
				redisstore.WithClock(clock),
				redisstore.WithPrefix(fmt.Sprintf("sluice-replay:%d:%d:", os.Getpid(), time.Now().UnixNano())),
				redisstore.WithExpirySlack(time.Minute),
				redisstore.WithTimeout(10*time.Second))
			if err != nil {
				return nil, nil, fmt.Errorf("--store %q: %v", u.Redacted(), err)
			}
			return s, s.Close, nil
		}
		raw = u.Redacted() // never echo a password
	}
	return nil, nil, errors.New(withHint(fmt.Sprintf("--store %q: unknown store (want memory, mem://, memory:// or a redis:// URL)", raw), storeHint(raw)))
}
