// SPDX-License-Identifier: Apache-2.0

//go:build unix

package procs

import (
	"syscall"
	"time"
)

// cpuTime returns the process's CPU time so far, user and system.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
