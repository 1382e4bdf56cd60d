// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestOutside13StalledGRPCStreams: with default flags, one TCP connection to
// the gRPC port opens streams that send their headers and never their
// message. README bounds what a slow client holds on the HTTP port ("A
// client that reaches the port holds a connection, a goroutine and its
// buffers only this long", http.go's timeouts); on the gRPC port nothing
// does: grpc-go's defaults allow 2^32-1 concurrent streams a connection,
// no idle or age limit, and a unary call waits for its message for as long
// as the client sends no deadline. Each stalled stream holds a goroutine
// (and its stack) for as long as the connection lives.
func TestOutside13StalledGRPCStreams(t *testing.T) {
	r := startServe(t, serveOptions{})
	conn, err := net.Dial("tcp", r.grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// Read (and drop) what the server sends, answering its SETTINGS; a
	// PING's ack tells that the server has read every frame before it.
	pong := make(chan struct{}, 1)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if f.IsAck() {
					pong <- struct{}{}
				}
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
		{":authority", "sluice"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := hb.Bytes()

	runtime.GC()
	before := runtime.NumGoroutine()
	const streams = 3000
	for i := range streams {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndHeaders: true}); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if err := fr.WritePing(false, [8]byte{1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pong:
	case <-time.After(30 * time.Second):
		t.Fatal("no PING ack in 30 s")
	}
	// The server's reader dispatches each stream (to a worker, or a
	// goroutine of its own) before it reads the PING: the count is taken.
	most := runtime.NumGoroutine()
	if grew := most - before; grew > streams/3 {
		t.Errorf("%d stalled streams on one connection: serve holds %d more goroutines (%d before); want what a client can pin bounded (e.g. MaxConcurrentStreams, a keepalive age)",
			streams, grew, before)
	}
}
