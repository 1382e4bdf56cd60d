// SPDX-License-Identifier: Apache-2.0

// Package replay replays a traffic trace through one rate-limiting policy on
// a virtual clock, to see what a policy would have done to real traffic
// before deploying it. It is the engine of the sluice replay command.
//
// A trace is text, one request per line:
//
//	# SECONDS KEY [COST]
//	0     rider
//	0.1   rider
//	59.5  partner 3
//
// SECONDS is the request's offset from the start of the trace, parsed
// exactly to the nanosecond (ParseSeconds); the trace starts at the Unix
// epoch, which is a window boundary for every period. Reader parses traces;
// Run replays one through a sluice.Store whose clock it moves to each
// request's instant, and writes one JSON object per decision, with every
// duration in seconds written exactly (AppendSeconds).
//
// Times are integers throughout: no trace time or duration passes through
// floating point, so replaying a trace is deterministic and matches the
// models of package sluice to the nanosecond.
package replay
