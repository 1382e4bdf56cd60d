// SPDX-License-Identifier: Apache-2.0

//go:build linux && !race && !msan && !asan

package rawconn

import (
	"syscall"
	"unsafe"
)

// sysRead is read(2) on fd into p (not empty), made raw: without entering
// the scheduler's system-call state.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), e
}

// sysWrite is write(2) on fd from p (not empty), made raw.
func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), e
}
