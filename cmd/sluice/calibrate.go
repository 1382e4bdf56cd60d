// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calibrate"
)

const calibrateUsage = `usage: sluice calibrate --algorithm ALG [flags] [TRACE]

Reads observed traffic from TRACE (or standard input), reports each key's
demand (the distribution over keys of the peak units in one aligned window of
1s, 10s, 1m and 1h, and of each key's exact need under ALG) and recommends a
policy for ALG that would never have refused at least --keep of the keys. It
then replays the traffic through the recommendation on a virtual clock and
reports the refusals it would have caused.

Flags:
  --algorithm ALG     token-bucket, gcra, leaky-bucket, fixed-window,
                      sliding-log or sliding-window (required)
  --period D          the policy's period (default 1s)
  --limit N           fix the limit (the bucket kinds' rate) and calibrate
                      only the burst
  --rate-window D     the bucket kinds' sustained rate: the --keep quantile
                      of the per-key peak in one aligned window of D, per
                      period, rounded up (default 1m, at least --period);
                      the burst is then what that rate needs
  --keep SHARE        share of keys never refused: 99.9% (default) or 0.999;
                      with few keys this is every key (50 keys: 99.9% keeps
                      all 50, so the busiest decides; 98% lets 1 be refused)
  --windows LIST      report windows (default 1s,10s,1m,1h)
  --format F          trace (default: "SECONDS KEY [COST]" lines, as for
                      sluice replay), jsonl (one JSON object per line, e.g.
                      Envoy's JSON access log), or a text access log:
                      common or combined (nginx, Apache), envoy (Envoy's
                      default access log format)
  --log-format T      a text access log written with this nginx log_format,
                      e.g. '$remote_addr [$time_local] "$request" $status
                      $request_time $msec'. The time is $msec if present,
                      else $time_local (whole seconds) or $time_iso8601;
                      with $request_time, a request arrived that long
                      before its line's time
  --key K             the key of a text access log: ip (default:
                      $remote_addr; Envoy's format: the first
                      X-Forwarded-For address), user, path, header:NAME or
                      field:NAME (a log_format variable). For jsonl:
                      field:NAME (as --key-field), or ip to read
                      --key-field as an address and drop its port
  --time-field NAME   jsonl: the time field, an RFC 3339 string or a number
                      of seconds since the Unix epoch (a JSON number or a
                      string holding one; default time)
  --key-field NAME    jsonl: the key field, a string or number (default key)
  --cost-field NAME   jsonl: an optional cost field (default: every line
                      costs 1)
  --yaml FILE         also write the recommendation as a sluice serve
                      configuration file (one domain, one descriptor key)
  --domain NAME       the YAML's domain (default calibrated)
  --descriptor KEY    the YAML's descriptor key (default: --key-field for
                      jsonl, else key)
  --shadow            write the YAML rule with shadow_mode: true

The traffic must be in time order (a text access log, written as requests
end, give or take a minute: a line further back is an error). It is read in
two or three passes, so standard input is first copied to a temporary file;
memory grows with the number of keys, not of lines. A malformed line exits
with status 1 and one line on standard error naming the line number.

A line of cost 0 is a peek, as in sluice replay: it takes nothing but is
admitted only if one unit would be, so the recommendation leaves room for
one unit at each peek.

Example:

  sluice calibrate --algorithm token-bucket --keep 99% examples/rider.trace
  sluice calibrate --algorithm sliding-log --period 10s --format jsonl \
      --time-field ts --key-field partner --yaml partner.yaml access.log
  sluice calibrate --algorithm gcra --format combined --key ip \
      /var/log/nginx/access.log
`

func runCalibrate(e env, args []string) int {
	const prefix = "sluice calibrate"
	fset := newFlagSet(prefix)
	alg := fset.String("algorithm", "", "")
	period := fset.Duration("period", time.Second, "")
	limit := fset.Int64("limit", 0, "")
	rateWindow := fset.Duration("rate-window", 0, "")
	keep := fset.String("keep", "99.9%", "")
	windows := fset.String("windows", "1s,10s,1m,1h", "")
	format := fset.String("format", "trace", "")
	logFormat := fset.String("log-format", "", "")
	keySpec := fset.String("key", "", "")
	timeField := fset.String("time-field", "time", "")
	keyField := fset.String("key-field", "key", "")
	costField := fset.String("cost-field", "", "")
	yamlFile := fset.String("yaml", "", "")
	domain := fset.String("domain", "calibrated", "")
	descriptor := fset.String("descriptor", "", "")
	shadow := fset.Bool("shadow", false, "")
	files, _, code, ok := parseCommand(e, fset, args, calibrateUsage)
	if !ok {
		return code
	}
	if len(files) > 1 {
		return e.fail(exitUsage, prefix, "unexpected argument %q: want at most one TRACE file", files[1])
	}
	cfg := calibrate.Config{Period: *period, Limit: *limit, RateWindow: *rateWindow}
	if *alg == "" {
		return e.fail(exitUsage, prefix, "--algorithm is required: one of %s", algorithmNames())
	}
	a, err := sluice.ParseAlgorithm(*alg)
	if err != nil {
		return e.fail(exitUsage, prefix, "--algorithm %q: unknown algorithm (want one of %s)", *alg, algorithmNames())
	}
	cfg.Algorithm = a
	if *period <= 0 {
		return e.fail(exitUsage, prefix, "--period %v: must be positive", *period)
	}
	if *limit != 0 && !a.IsBucket() {
		return e.fail(exitUsage, prefix, "--limit is for token-bucket, gcra and leaky-bucket (it fixes their rate); %s calibrates its limit", a)
	}
	if *rateWindow != 0 && (!a.IsBucket() || *limit != 0) {
		return e.fail(exitUsage, prefix, "--rate-window is for token-bucket, gcra and leaky-bucket without --limit (it sets their rate)")
	}
	if *rateWindow < 0 || *rateWindow != 0 && *rateWindow < max(*period, 0) {
		return e.fail(exitUsage, prefix, "--rate-window %v: must be at least --period (%v)", *rateWindow, *period)
	}
	if *limit < 0 {
		return e.fail(exitUsage, prefix, "--limit %d: must be at least 1 (or 0 to calibrate it)", *limit)
	}
	if cfg.Keep, err = calibrate.ParseShare(*keep); err != nil {
		return e.fail(exitUsage, prefix, "--keep: %v", err)
	}
	for _, w := range strings.Split(*windows, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(w))
		if err != nil || d <= 0 {
			return e.fail(exitUsage, prefix, "--windows %q: %q is not a positive duration", *windows, w)
		}
		cfg.Windows = append(cfg.Windows, d)
	}
	if *yamlFile != "" {
		// The YAML needs both names: sluice serve refuses an empty domain
		// or descriptor key.
		if *domain == "" {
			return e.fail(exitUsage, prefix, "--domain %q: the --yaml file's domain must not be empty", *domain)
		}
		descriptorSet := false
		fset.Visit(func(f *flag.Flag) { descriptorSet = descriptorSet || f.Name == "descriptor" })
		if descriptorSet && *descriptor == "" {
			return e.fail(exitUsage, prefix, "--descriptor %q: the --yaml file's descriptor key must not be empty", *descriptor)
		}
	}
	var f calibrate.Format
	formatSet := false
	fset.Visit(func(fl *flag.Flag) { formatSet = formatSet || fl.Name == "format" })
	if *logFormat != "" {
		if formatSet {
			return e.fail(exitUsage, prefix, "--log-format and --format: give one (--log-format is a text access log)")
		}
		*format = *logFormat
	}
	switch *format {
	case "trace":
		if *keySpec != "" {
			return e.fail(exitUsage, prefix, "--key: a trace's key is its second field; --key is for access logs")
		}
	case "jsonl":
		switch k := *keySpec; {
		case strings.HasPrefix(k, "field:"):
			*keyField, *keySpec = strings.TrimPrefix(k, "field:"), ""
		case strings.HasPrefix(k, "header:"):
			*keyField, *keySpec = strings.TrimPrefix(k, "header:"), ""
		case k == "" || k == "ip":
		default:
			return e.fail(exitUsage, prefix, "--key %q: for jsonl want field:NAME or ip (the --key-field address, its port dropped)", k)
		}
		f = calibrate.Format{JSONL: true, TimeField: *timeField, KeyField: *keyField, CostField: *costField, Key: *keySpec}
		if *descriptor == "" {
			*descriptor = *keyField
		}
	default:
		if _, named := calibrate.LogFormats[*format]; !named && *logFormat == "" {
			return e.fail(exitUsage, prefix, "--format %q: want trace, jsonl, common, combined or envoy (or --log-format for an nginx log_format)", *format)
		}
		for _, name := range []string{"time-field", "key-field", "cost-field"} {
			isSet := false
			fset.Visit(func(fl *flag.Flag) { isSet = isSet || fl.Name == name })
			if isSet {
				return e.fail(exitUsage, prefix, "--%s is for --format jsonl; a text access log's fields are its format's (--key picks the key)", name)
			}
		}
		f = calibrate.Format{Log: *format, Key: *keySpec}
		if _, err := calibrate.NewReader(strings.NewReader(""), f); err != nil {
			return e.fail(exitUsage, prefix, "%s", strings.TrimPrefix(err.Error(), "calibrate: "))
		}
		if *descriptor == "" {
			*descriptor = descriptorFor(*keySpec)
		}
	}
	if *descriptor == "" {
		*descriptor = "key"
	}

	path := ""
	if len(files) == 1 && files[0] != "-" {
		path = files[0]
	} else {
		// Several passes: spool standard input to a temporary file.
		tmp, err := os.CreateTemp("", "sluice-calibrate-*")
		if err != nil {
			return e.fail(exitFailure, prefix, "spool standard input: %v", err)
		}
		defer os.Remove(tmp.Name())
		_, err = io.Copy(tmp, e.stdin)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return e.fail(exitFailure, prefix, "spool standard input: %v", err)
		}
		path = tmp.Name()
	}
	src := func() (calibrate.Reader, io.Closer, error) {
		fh, err := openTrace(path)
		if err != nil {
			return nil, nil, err
		}
		r, err := calibrate.NewReader(fh, f)
		if err != nil {
			fh.Close()
			return nil, nil, err
		}
		return r, fh, nil
	}
	rep, err := calibrate.Calibrate(context.Background(), src, cfg)
	if err != nil {
		return e.fail(exitFailure, prefix, "%s", strings.TrimPrefix(err.Error(), "calibrate: "))
	}
	if err := rep.WriteText(e.stdout); err != nil {
		return e.fail(exitFailure, prefix, "write report: %v", err)
	}
	if *yamlFile != "" {
		var b bytes.Buffer
		calibrate.WriteYAML(&b, rep.Policy, calibrate.Rule{Domain: *domain, Key: *descriptor, Shadow: *shadow})
		if err := os.WriteFile(*yamlFile, b.Bytes(), 0o644); err != nil {
			return e.fail(exitFailure, prefix, "--yaml: %v", err)
		}
		fmt.Fprintf(e.stdout, "\nwrote %s (load it with sluice serve --config DIR)\n", *yamlFile)
	}
	return exitOK
}

// descriptorFor names the --yaml descriptor key for an access log's --key
// as Envoy's rate_limits actions send it: remote_address for the client
// address, the header or variable name otherwise.
func descriptorFor(key string) string {
	switch {
	case key == "" || key == "ip":
		return "remote_address"
	case strings.HasPrefix(key, "header:"):
		return strings.ToLower(strings.TrimPrefix(key, "header:"))
	case strings.HasPrefix(key, "field:"):
		return strings.TrimPrefix(key, "field:")
	}
	return key
}
