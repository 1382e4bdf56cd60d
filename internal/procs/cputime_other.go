// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package procs

import "time"

// cpuTime reports that the process's CPU time is not known here.
func cpuTime() (time.Duration, bool) { return 0, false }
