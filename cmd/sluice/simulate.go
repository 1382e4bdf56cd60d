// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/replay"
	"github.com/sluicehq/sluice/simulate"
)

const simulateUsage = `usage: sluice simulate --algorithm ALG --limit N --period DURATION [--burst B]
                       (--pattern PATTERN | TRACE) [-o FILE] [--title TEXT]
                       [--from TIME --to TIME]

Runs traffic through a policy on a virtual clock, with the exact model, and
draws an SVG picture of the admitted (green), delayed (orange, leaky-bucket,
with a line to the release) and refused (red) requests over the limiter's
state (tokens, queue or count) of the first key. The picture goes to
standard output unless -o names a file. A shaded band marks the densest
period (the one window of the period with the most admitted), and the
aligned-window kinds draw each window boundary as a dashed line. --from and
--to draw only that span (every request still runs): to zoom on a window's
edge, as in a boundary attack.

The policy flags are sluice replay's. The traffic is a trace file (or - for
standard input) in replay's format, or a --pattern: clauses separated by
commas, each optionally starting with "then", read with a cursor that starts
at 0:

  burst N [at TIME]        N requests at TIME (default: the cursor)
  N every DUR for DUR      N requests at cursor+DUR, cursor+2·DUR, ... up to
                           cursor+FOR; the cursor moves to cursor+FOR
  N every DUR times K      the same, K times
  wait DUR                 move the cursor
  ... cost C               (at the end of a clause) each request costs C

TIME and DUR are seconds (1.5) or durations (100ms). Example:

  sluice simulate --algorithm token-bucket --limit 5 --period 1s --burst 10 \
      --pattern "burst 6 at 0, then 1 every 100ms for 2s" -o rider.svg
`

func runSimulate(e env, args []string) int {
	const prefix = "sluice simulate"
	fset := newFlagSet(prefix)
	pf := addPolicyFlags(fset)
	pattern := fset.String("pattern", "", "")
	out := fset.String("o", "", "")
	title := fset.String("title", "", "")
	fromFlag := fset.String("from", "", "")
	toFlag := fset.String("to", "", "")
	files, set, code, ok := parseCommand(e, fset, args, simulateUsage)
	if !ok {
		return code
	}
	p, err := pf.policy(set)
	if err != nil {
		return e.fail(exitUsage, prefix, "%v", err)
	}
	var reqs []simulate.Request
	switch {
	case len(files) > 1 || len(files) == 1 && set["pattern"]:
		return e.fail(exitUsage, prefix, "want one traffic: --pattern or one TRACE file")
	case set["pattern"]:
		if reqs, err = simulate.ParsePattern(*pattern); err != nil {
			return e.fail(exitUsage, prefix, "--pattern: %v", err)
		}
	case len(files) == 1:
		in := e.stdin
		if files[0] != "-" {
			f, err := openTrace(files[0])
			if err != nil {
				return e.fail(exitFailure, prefix, "%v", err)
			}
			defer f.Close()
			in = f
		}
		if reqs, err = simulate.ReadTrace(in); err != nil {
			return e.fail(exitFailure, prefix, "%s", strings.TrimPrefix(err.Error(), "replay: "))
		}
		if len(reqs) == 0 {
			return e.fail(exitFailure, prefix, "trace %q has no requests", files[0])
		}
	default:
		return e.fail(exitUsage, prefix, "no traffic: give --pattern or a TRACE file")
	}
	var opts []simulate.Option
	if set["from"] || set["to"] {
		from, err1 := parseSimTime(*fromFlag)
		to, err2 := parseSimTime(*toFlag)
		switch {
		case !set["from"] || !set["to"]:
			return e.fail(exitUsage, prefix, "--from and --to go together")
		case err1 != nil:
			return e.fail(exitUsage, prefix, "--from %q: want seconds (59.5) or a duration (59s)", *fromFlag)
		case err2 != nil:
			return e.fail(exitUsage, prefix, "--to %q: want seconds (60.5) or a duration (1m)", *toFlag)
		case to <= from:
			return e.fail(exitUsage, prefix, "--to %v: must be after --from %v", to, from)
		}
		opts = append(opts, simulate.Zoom(from, to))
	}
	r, err := simulate.Run(context.Background(), p, reqs, opts...)
	if err != nil {
		return e.fail(exitFailure, prefix, "%s", strings.TrimPrefix(err.Error(), "simulate: "))
	}
	if *title == "" {
		*title = string(p.Algorithm)
	}
	r.Desc = simulateDesc(args)
	var b bytes.Buffer
	r.WriteSVG(&b, *title)
	if *out == "" || *out == "-" {
		if _, err := e.stdout.Write(b.Bytes()); err != nil {
			return e.fail(exitFailure, prefix, "write: %v", err)
		}
		return exitOK
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		return e.fail(exitFailure, prefix, "-o: %v", err)
	}
	return exitOK
}

// simulateDesc is the command line that made a picture, without its output
// file, for the picture's <desc> (arguments with spaces or quotes in Go
// quotes): TestPicturesAreCurrent remakes docs/*.svg
// from it.
func simulateDesc(args []string) string {
	var kept []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "--o":
			i++
			continue
		case strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "--o="):
			continue
		}
		if a == "" || strings.ContainsAny(a, " \t\n\"\\") {
			a = strconv.Quote(a)
		}
		kept = append(kept, a)
	}
	return "sluice simulate " + strings.Join(kept, " ")
}

// parseSimTime reads a --from or --to time: seconds or a duration.
func parseSimTime(s string) (time.Duration, error) {
	if d, err := replay.ParseSeconds(s); err == nil {
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad time %q", s)
	}
	return d, nil
}
