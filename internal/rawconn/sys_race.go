// SPDX-License-Identifier: Apache-2.0

//go:build linux && (race || msan || asan)

package rawconn

import "syscall"

// With the race detector (or msan or asan), reads and writes go through
// package syscall after all: it tells the detector about the memory they
// touch and about the order they impose (a write to a socket before the
// read of it at the other end), which a raw system call would hide. The
// rest of the package, and so what its tests check, is the same.

// sysRead is read(2) on fd into p (not empty).
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return n, errno(err)
}

// sysWrite is write(2) on fd from p (not empty).
func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return n, errno(err)
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
