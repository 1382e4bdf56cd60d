// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/sluicehq/sluice"
)

// newFlagSet returns the flag set of the subcommand name ("sluice replay"):
// it prints nothing itself, since errors are reported on one line and help
// is the command's usage text.
func newFlagSet(name string) *flag.FlagSet {
	fset := flag.NewFlagSet(name, flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	fset.Usage = func() {}
	return fset
}

// parseCommand parses args with fset, flags and file arguments in any
// order, and returns the files and the names of the flags given. When ok is
// false the command is over with exit code code: help was asked for (usage
// is printed) or a flag was bad (one line on standard error).
func parseCommand(e env, fset *flag.FlagSet, args []string, usage string) (files []string, set map[string]bool, code int, ok bool) {
	files, err := parseInterspersed(fset, args)
	if errors.Is(err, flag.ErrHelp) {
		io.WriteString(e.stdout, usage)
		return nil, nil, exitOK, false
	}
	if err != nil {
		name := fset.Name()
		return nil, nil, e.fail(exitUsage, name, "%v (run 'sluice help %s' for usage)", err, strings.TrimPrefix(name, "sluice ")), false
	}
	set = make(map[string]bool)
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return files, set, exitOK, true
}

// openTrace opens the trace file name; its error names the file once
// ("trace \"x\": no such file or directory").
func openTrace(name string) (*os.File, error) {
	f, err := os.Open(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("trace %q: %v", name, err)
	}
	return f, nil
}

// policyFlags are the policy flags of replay and simulate.
type policyFlags struct {
	alg, period  *string
	limit, burst *int64
}

// addPolicyFlags defines --algorithm, --limit, --period and --burst on fset.
func addPolicyFlags(fset *flag.FlagSet) policyFlags {
	return policyFlags{
		alg:    fset.String("algorithm", "", ""),
		limit:  fset.Int64("limit", 0, ""),
		period: fset.String("period", "", ""),
		burst:  fset.Int64("burst", 0, ""),
	}
}

// policy checks the policy flags (set names those given) and returns the
// policy.
func (f policyFlags) policy(set map[string]bool) (sluice.Policy, error) {
	return replayPolicy(set, *f.alg, *f.limit, *f.period, *f.burst)
}
