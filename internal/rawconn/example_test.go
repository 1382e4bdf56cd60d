// SPDX-License-Identifier: Apache-2.0

package rawconn_test

import (
	"fmt"
	"io"
	"net"

	"github.com/sluicehq/sluice/internal/rawconn"
)

// A server wraps its listener: the connections it accepts read and write
// with raw system calls, and behave as any net.Conn.
func Example() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	l = rawconn.Listen(l)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c = rawconn.Wrap(c)
	fmt.Fprint(c, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(buf))
	// Output: ping
}
