// SPDX-License-Identifier: Apache-2.0

// Command sluice is the sluice rate limiter's command-line tool.
//
// Usage:
//
//	sluice <command> [arguments]
//
// The commands are:
//
//	serve     run the rate limit service (Envoy RLS v3, HTTP API, metrics)
//	replay    replay a traffic trace through a policy on a virtual clock
//	calibrate recommend a policy from observed traffic
//	simulate  draw what a policy does to a traffic pattern (SVG)
//	config    check a rate-limit configuration directory (config check DIR)
//	version   print the version of sluice
//	help      print help for sluice or for a command
//
// sluice replay reads a trace, one request per line ("SECONDS KEY [COST]"),
// from a file or standard input, and prints one JSON decision per request:
//
//	sluice replay --algorithm token-bucket --limit 5 --period 1s --burst 10 examples/rider.trace
//
// Run "sluice help replay" for its flags, the trace format and the output.
//
// The exit status is 0 on success, 1 when a command fails (a malformed
// trace, an unreadable file, a store error) and 2 for a usage error (an
// unknown command, a bad flag or an invalid policy). Every error is one line
// on standard error.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	_ "time/tzdata" // time_zone in a config loads on a host or image without zoneinfo

	"github.com/sluicehq/sluice/internal/buildinfo"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // the command line is wrong
)

// env is what a command gets from the process: its standard streams.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// fail prints one error line, "sluice <cmd>: <msg>", on e.stderr and returns
// code. Newlines in msg become spaces, so an error is always one line.
func (e env) fail(code int, prefix, format string, args ...any) int {
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")
	fmt.Fprintf(e.stderr, "%s: %s\n", prefix, msg)
	return code
}

// command is one sluice subcommand. Adding one (serve, config check) is one
// row in commands and its run function.
type command struct {
	name    string
	summary string                         // one line, for the command list
	usage   string                         // the full help text
	run     func(e env, args []string) int // args exclude the command name
}

// commands returns the command table, in the order help lists it. (A
// function, not a variable, because help refers back to the table.)
func commands() []command {
	return []command{
		{name: "serve", summary: "run the rate limit service (Envoy RLS v3, HTTP API, metrics)", usage: serveUsage, run: runServe},
		{name: "replay", summary: "replay a traffic trace through a policy on a virtual clock", usage: replayUsage, run: runReplay},
		{name: "calibrate", summary: "recommend a policy from observed traffic (a trace or a JSON-lines log)", usage: calibrateUsage, run: runCalibrate},
		{name: "simulate", summary: "draw what a policy does to a traffic pattern (SVG)", usage: simulateUsage, run: runSimulate},
		{name: "config", summary: "check a rate-limit configuration directory (config check DIR)", usage: configUsage, run: runConfig},
		{name: "version", summary: "print the version of sluice", usage: "usage: sluice version\n\nPrints the version of sluice (the module version, or the git revision,\ncommit time and \"modified\" for a build from a checkout) and the Go\ntoolchain that built it.\n", run: runVersion},
		{name: "help", summary: "print help for sluice or for a command", usage: "usage: sluice help [COMMAND]\n", run: runHelp},
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// run is the whole program but for the exit: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := env{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	}
	c, ok := lookup(name)
	if !ok {
		return e.fail(exitUsage, "sluice", "unknown command %q (run 'sluice help' for the list)", name)
	}
	return c.run(e, args[1:])
}

func printUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString("sluice is a rate limiter: exact token-bucket, gcra, leaky-bucket, fixed-window,\nsliding-log and sliding-window limits for Go services.\n\n")
	b.WriteString("Usage:\n\n\tsluice <command> [arguments]\n\nThe commands are:\n\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "\t%-9s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'sluice help <command>' for more about a command.\n")
	io.WriteString(w, b.String())
}

func runHelp(e env, args []string) int {
	switch len(args) {
	case 0:
		printUsage(e.stdout)
		return exitOK
	case 1:
		c, ok := lookup(args[0])
		if !ok {
			return e.fail(exitUsage, "sluice help", "unknown command %q (run 'sluice help' for the list)", args[0])
		}
		io.WriteString(e.stdout, c.usage)
		return exitOK
	}
	return e.fail(exitUsage, "sluice help", "too many arguments: want at most one command name")
}

func runVersion(e env, args []string) int {
	if len(args) > 0 {
		return e.fail(exitUsage, "sluice version", "unexpected argument %q", args[0])
	}
	fmt.Fprintf(e.stdout, "sluice %s %s\n", buildinfo.Version(), runtime.Version())
	return exitOK
}
