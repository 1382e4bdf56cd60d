// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package rawconn

import "net"

// Wrap returns c: raw system calls are for Linux only.
func Wrap(c net.Conn) net.Conn { return c }

// Listen returns l: raw system calls are for Linux only.
func Listen(l net.Listener) net.Listener { return l }
