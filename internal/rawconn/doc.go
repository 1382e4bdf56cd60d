// SPDX-License-Identifier: Apache-2.0

// Package rawconn wraps TCP connections so that their reads and writes are
// raw system calls: read(2) and write(2) on the non-blocking socket, made
// without telling the Go scheduler that a system call is under way, with the
// network poller still doing all the waiting (and so deadlines and Close
// work as on any net.Conn).
//
// Why: a Go program's ordinary socket read or write enters the scheduler's
// system-call state, and the first one after the program was idle wakes the
// runtime's monitor thread (sysmon), which then polls every 20 µs until the
// program is idle again. A service answering one small request at a time
// pays that on nearly every request: on a 2-vCPU virtual machine, raw calls
// cut sluice serve's CPU per request by 29 % at 16 requests in flight
// (BENCHMARKS.md).
// A read or write on a non-blocking socket never blocks, so it need not
// hand its thread's P to another thread, which is all that state is for.
//
// With the race detector (or msan or asan) the reads and writes go through
// package syscall, which tells the detector what they do. On systems other
// than Linux, Wrap and Listen return what they are given.
package rawconn
