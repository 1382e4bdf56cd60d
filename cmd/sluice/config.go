// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/server"
)

const configUsage = `usage: sluice config check [--merge-domains] [--gateway-domain D] [DIR|FILE]

Config check loads the rate-limit configuration in DIR (every *.yaml and
*.yml file, in the format of Envoy's ratelimit service with sluice's
extensions) exactly as sluice serve would, without starting anything. Given
one FILE (.yaml or .yml), it checks that file as if it were alone in a
directory. With no argument it checks the built-in default configuration.

With --merge-domains, several files may add descriptors to one domain, as
with sluice serve --merge-domains.

The domain named by --gateway-domain (default gateway, as for sluice serve)
is also checked as gateway mode would build it: its route patterns must
parse and no two may conflict (sluice serve --upstream refuses such a
configuration at start and on reload). Other domains' route values are
opaque to RLS and not checked.

On success it prints one summary line and exits 0, and on standard error a
warning line for each rule that does less over Envoy's RLS than in the
library: a leaky-bucket rule is a meter there, not a queue (Envoy cannot
hold a request for its delay), and an in-flight rule applies in gateway
mode only. Otherwise it prints
every problem on its own line on standard error, each naming the file, the
line, the field and the reason, and exits 1.
`

func runConfig(e env, args []string) int {
	if len(args) == 0 {
		return e.fail(exitUsage, "sluice config", "missing subcommand: want 'sluice config check DIR'")
	}
	if args[0] != "check" {
		return e.fail(exitUsage, "sluice config", "unknown subcommand %q: want 'sluice config check DIR'", args[0])
	}
	args = args[1:]
	fset := flag.NewFlagSet("sluice config check", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	merge := fset.Bool("merge-domains", false, "")
	gatewayDomain := fset.String("gateway-domain", server.GatewayDomain, "")
	if err := fset.Parse(args); err != nil {
		return e.fail(exitUsage, "sluice config check", "%v (want 'sluice config check [--merge-domains] [--gateway-domain D] [DIR|FILE]')", err)
	}
	args = fset.Args()
	var opts []config.Option
	if *merge {
		opts = append(opts, config.WithMergeDomains())
	}
	if len(args) > 1 {
		return e.fail(exitUsage, "sluice config check", "too many arguments: want one directory or file")
	}
	var (
		c     *config.Config
		err   error
		where = "built-in defaults"
	)
	if len(args) == 0 {
		c, err = config.Default()
	} else {
		where = args[0]
		c, err = config.LoadPath(args[0], opts...)
	}
	if err == nil {
		err = server.CheckGateway(c, *gatewayDomain)
	}
	if err != nil {
		return failEach(e, "sluice config check", err)
	}
	for _, w := range c.Warnings() {
		fmt.Fprintf(e.stderr, "sluice config check: warning: %s\n", w)
	}
	fmt.Fprintf(e.stdout, "%s: ok: %s (%s)\n", where, c.Summary(), strings.Join(c.Domains(), ", "))
	return exitOK
}

// failEach prints each error joined in err on its own line and returns
// exitFailure.
func failEach(e env, prefix string, err error) int {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, x := range errs {
		e.fail(exitFailure, prefix, "%v", x)
	}
	return exitFailure
}
