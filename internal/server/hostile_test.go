// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

// TestSimulateBounded: a simulation beyond MaxSimulations running is
// answered 503 with Retry-After at once, not run beside them (sixteen at
// once made most RLS calls miss Envoy's deadline). Without the bound it ran.
func TestSimulateBounded(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	body := `{"algorithm":"gcra","limit":5,"period":"1s","pattern":"1 every 100ms for 2s"}`
	for range MaxSimulations {
		h.srv.simulating <- struct{}{} // simulations running
	}
	resp, err := http.Post(h.http.URL+"/v1/simulate", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("busy: %s, Retry-After %q: %s", resp.Status, resp.Header.Get("Retry-After"), b)
	}
	for range MaxSimulations {
		<-h.srv.simulating
	}
	if code, s := h.post(t, "/v1/simulate", body); code != http.StatusOK {
		t.Errorf("free: %d %s", code, s)
	}
}

// pipeListener hands the server the far ends of net.Pipe connections, so
// an HTTP server runs in a synctest bubble on its fake clock.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func (l *pipeListener) dial() net.Conn {
	c, s := net.Pipe()
	l.conns <- s
	return c
}

// TestHTTPServerTimeouts: a client that never finishes its request, or
// never reads its answer, is cut off after ReadTimeout or WriteTimeout (on
// the bubble's fake clock), instead of holding its connection and buffers
// as long as it likes.
func TestHTTPServerTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No real sockets in the bubble: they would keep its clock still.
		store := memstore.New()
		defer store.Close()
		s, err := New(store, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			t.Fatal(err)
		}
		c0, err := config.Load(mapFS("rides.yaml", ridesYAML))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(c0); err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		srv := NewHTTPServer(s.Handler())
		go srv.Serve(l)
		defer srv.Close()

		// A body promised and never sent.
		c := l.dial()
		t0 := time.Now()
		io.WriteString(c, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
		c.SetReadDeadline(t0.Add(ReadTimeout + time.Minute)) // fail, not hang, without a timeout
		_, err = io.ReadAll(c)                               // the server's answer, then EOF when it closes
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("a stalled body: %v", err)
		}
		if d := time.Since(t0); d < ReadTimeout-ReadHeaderTimeout || d > ReadTimeout {
			t.Errorf("a stalled body was held %v; want at most ReadTimeout, %v", d, ReadTimeout)
		}
		c.Close()

		// An answer never read: the live page's script, about 10 KiB,
		// more than a pipe holds.
		c = l.dial()
		t0 = time.Now()
		io.WriteString(c, "GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReaderSize(c, 16)
		if _, err := br.Peek(1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(WriteTimeout + time.Second) // the fake clock: nothing reads
		synctest.Wait()
		c.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := io.ReadAll(br); err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("an unread answer: %v", err)
		}
		if d := time.Since(t0); d > WriteTimeout+time.Second {
			t.Errorf("an unread answer held the connection %v", d)
		}
		c.Close()
		l.Close()
	})
}
