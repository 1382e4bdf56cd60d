// SPDX-License-Identifier: Apache-2.0

package rawconn_test

import (
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/sluicehq/sluice/internal/rawconn"
)

func TestWrapped(t *testing.T) {
	c1, c2, stop, err := tcpPair(t)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, raw1 := c1.(*rawconn.Conn)
	_, raw2 := c2.(*rawconn.Conn)
	if !raw1 || !raw2 {
		t.Fatalf("Wrap gave %T, Listen's Accept gave %T; want *rawconn.Conn", c1, c2)
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if got := rawconn.Wrap(p1); got != p1 {
		t.Fatalf("Wrap(a net.Pipe end) = %T, want it unchanged", got)
	}
}

// BenchmarkPingPong sends one byte back and forth over a loopback TCP
// connection, with both ends plain or both wrapped.
func BenchmarkPingPong(b *testing.B) {
	for _, wrapped := range []bool{false, true} {
		b.Run(fmt.Sprintf("raw=%v", wrapped), func(b *testing.B) {
			c1, c2, stop, err := tcpPair(b)
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			if !wrapped {
				c1, c2 = c1.(*rawconn.Conn).TCPConn, c2.(*rawconn.Conn).TCPConn
			}
			go func() {
				buf := make([]byte, 1)
				for {
					if _, err := io.ReadFull(c2, buf); err != nil {
						return
					}
					if _, err := c2.Write(buf); err != nil {
						return
					}
				}
			}()
			buf := make([]byte, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c1.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c1, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
