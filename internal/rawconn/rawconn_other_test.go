// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package rawconn_test

import (
	"net"
	"testing"
)

func TestWrapped(t *testing.T) {
	c1, c2, stop, err := tcpPair(t)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, ok := c1.(*net.TCPConn); !ok {
		t.Fatalf("Wrap gave %T; want the *net.TCPConn unchanged", c1)
	}
	if _, ok := c2.(*net.TCPConn); !ok {
		t.Fatalf("Listen's Accept gave %T; want the *net.TCPConn unchanged", c2)
	}
}
