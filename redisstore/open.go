// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
)

// DefaultMaxFlushDelay is how long Open's client may hold a command back to
// send it together with other callers' commands in one write.
const DefaultMaxFlushDelay = 20 * time.Microsecond

// Open returns a store that connects to Redis as url says and owns the
// connection: Close closes it. Only a bad URL or option is an error. Open
// does not wait for Redis: it starts connecting in the background, and a
// call waits for the connection no longer than a call to Redis may take
// (its context's deadline less the margin, or the store's timeout). If
// Redis cannot be reached, the store's calls fail (fast, under the circuit
// breaker) until it can, and then the store connects. The forms, all with optional user:password@
// and query parameters as rueidis.ParseURL reads them (db, dial_timeout,
// skip_verify, ...):
//
//	redis://host:port/db                         standalone
//	rediss://host:port                           standalone over TLS
//	redis://host1:port1?addr=host2:port2&addr=…  Cluster (detected), from seed nodes
//	redis+cluster://host1:port1,host2:port2      the same, with the seeds listed
//	rediss+cluster://host1:port1,host2:port2     Cluster over TLS
//	redis://s1:26379?addr=s2:26379&master_set=M  Sentinel: the master M
//
// With Sentinel, user:password@ are the master's credentials; the
// sentinels' own (sentinel requirepass) are the parameters
// sentinel_username and sentinel_password, and rediss:// (and
// WithTLSConfig) apply to the sentinels as well as to the master.
//
// The client keeps one pipelined connection per Redis node and gathers the
// commands of concurrent callers into its writes (up to
// DefaultMaxFlushDelay); for other client settings, make the rueidis client
// yourself and use New.
func Open(url string, opts ...Option) (*Store, error) {
	o, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	if o.Dialer.Timeout == 0 {
		o.Dialer.Timeout = time.Second
	}
	if o.MaxFlushDelay == 0 {
		// Let the connection's writer gather the commands of concurrent
		// callers for up to DefaultMaxFlushDelay: fewer write system
		// calls, measured at +16% decisions/s and lower p50 and p99 with
		// 64 callers, and no measurable cost with 1 or 16 (BENCHMARKS.md).
		o.MaxFlushDelay = DefaultMaxFlushDelay
	}
	s, err := configure(opts)
	if err != nil {
		return nil, err
	}
	wrap := s.wrapConn
	o.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, tc *tls.Config) (net.Conn, error) {
		// Every connection the client makes comes here: the first, and
		// each one after a connection is lost (Redis died, say). So every
		// failed attempt is counted, not only Open's.
		c, err := dial(ctx, dst, d, tc, wrap)
		if err != nil && !s.closed.Load() {
			s.stats.dialErrors.Add(1)
		}
		return c, err
	}
	// One pipelined connection per Redis node, for every kind of client
	// (rueidis's default for Cluster; its standalone and Sentinel clients
	// would open up to four, by GOMAXPROCS at the start): Redis runs the
	// scripts on one thread, at most about 100 k decisions/s here
	// (BENCHMARKS.md), far below what one connection carries, and one
	// connection gathers more commands into each write. Measured: sluice
	// serve on 2 shared vCPUs, Redis at 16 in flight, 38.3 and 40.2 → 35.3
	// and 35.5 µs of CPU per request; BenchmarkTake unchanged within noise.
	o.PipelineMultiplex = -1
	if s.tlsConf != nil {
		if o.TLSConfig == nil {
			return nil, fmt.Errorf("redisstore: store URL %s: WithTLSConfig needs a rediss:// or rediss+cluster:// URL", redact(url))
		}
		c := s.tlsConf.Clone()
		if c.ServerName == "" {
			c.ServerName = o.TLSConfig.ServerName
		}
		o.TLSConfig = c
		if o.Sentinel.MasterSet != "" {
			o.Sentinel.TLSConfig = c.Clone()
		}
	}
	s.owned = true
	s.dial = &dialer{opt: o, url: redact(url)}
	// If Redis is down or unreachable the store still works: its calls
	// fail (under the breaker) until a connection succeeds.
	s.dial.mu.Lock()
	s.startDial()
	s.dial.mu.Unlock()
	return s, nil
}

// dialer connects Open's client on demand, in the background (rueidis
// takes no context to connect with), at most once per
// DefaultBreakerCooldown while connecting fails. Callers wait for an
// attempt in flight only as long as their context allows.
type dialer struct {
	opt     rueidis.ClientOption
	url     string
	mu      sync.Mutex
	running chan struct{} // closed when the attempt in flight ends; nil if none
	lastErr error
	lastAt  time.Time
}

// dial connects to a Redis server (or sentinel) as rueidis would, with the
// TCP connection passed through wrap (WithConnWrapper) if it is not nil. As
// with tls.Dialer, the dialer's Timeout and Deadline bound the connection
// and the TLS handshake together, and an empty ServerName is the host's.
func dial(ctx context.Context, dst string, d *net.Dialer, tc *tls.Config, wrap func(net.Conn) net.Conn) (net.Conn, error) {
	if wrap == nil {
		wrap = func(c net.Conn) net.Conn { return c }
	}
	if tc == nil {
		c, err := d.DialContext(ctx, "tcp", dst)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	if !d.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Deadline)
		defer cancel()
	}
	c, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		return nil, err
	}
	if tc.ServerName == "" {
		host, _, _ := net.SplitHostPort(dst)
		tc = tc.Clone()
		tc.ServerName = host
	}
	t := tls.Client(wrap(c), tc)
	if err := t.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return t, nil
}

// connection returns the client, first making it (a call under the
// breaker, bounded as calls are) if there is none yet.
func (s *Store) connection(ctx context.Context) (*conn, error) {
	if cn := s.conn.Load(); cn != nil {
		return cn, nil
	}
	if s.dial == nil {
		return nil, errZero // neither a client (New) nor a dialer (Open): the zero Store
	}
	if err := s.call(ctx, s.connect); err != nil {
		return nil, err
	}
	return s.conn.Load(), nil
}

// Ping asks Redis for an answer, as a call of the store: under its
// breaker, within its timeout (and ctx's deadline less the margin), and
// counted in Stats. It is nil once Redis answers a PING on a connection
// the store's URL and options made, so it also reports what only a reply
// shows: a wrong password, a database index out of range. (On a Cluster it
// asks one node.)
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("redisstore: ping: %w", errClosed)
	}
	cn, err := s.connection(ctx)
	if err == nil {
		err = s.call(ctx, func(ctx context.Context) error {
			return cn.client.Do(ctx, cn.client.B().Ping().Build()).Error()
		})
	}
	if err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return nil
}

// connect makes the client if there is none, waiting for it until ctx
// ends: a connection that comes later is kept for the calls after.
func (s *Store) connect(ctx context.Context) error {
	d := s.dial
	d.mu.Lock()
	switch {
	case s.conn.Load() != nil:
		d.mu.Unlock()
		return nil
	case s.closed.Load():
		d.mu.Unlock()
		return errClosed
	case d.running == nil && d.lastErr != nil && time.Since(d.lastAt) < DefaultBreakerCooldown:
		err := d.lastErr
		d.mu.Unlock()
		return err
	case d.running == nil:
		s.startDial()
	}
	running := d.running
	d.mu.Unlock()
	select {
	case <-running:
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.conn.Load() != nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.closed.Load() {
		return errClosed
	}
	return d.lastErr
}

// startDial starts an attempt to connect in the background. The caller
// holds s.dial.mu, and no attempt is in flight.
func (s *Store) startDial() {
	d := s.dial
	done := make(chan struct{})
	d.running = done
	go func() {
		dialed := s.stats.dialErrors.Load()
		c, err := rueidis.NewClient(d.opt)
		d.mu.Lock()
		defer d.mu.Unlock()
		defer close(done)
		d.running = nil
		switch {
		case err != nil:
			if s.stats.dialErrors.Load() == dialed && !s.closed.Load() {
				// Connected, but turned away (a wrong password, a
				// database out of range): one failed attempt, which
				// the dial itself did not count.
				s.stats.dialErrors.Add(1)
			}
			d.lastErr, d.lastAt = fmt.Errorf("connecting to %s: %w", d.url, err), time.Now()
		case s.closed.Load():
			c.Close()
		default:
			d.lastErr = nil
			s.conn.Store(newConn(c))
		}
	}()
}

// errClosed is sluice.ErrStoreClosed: every method returns it (wrapped) after Close.
var errClosed = sluice.ErrStoreClosed

// Close releases the store; it closes the client if Open created it (a
// connection Open is still making is closed when it is made). Calls after
// Close fail with an error wrapping sluice.ErrStoreClosed. Close returns
// nil.
func (s *Store) Close() error {
	if s.dial != nil {
		// A connection still being made is closed when it comes.
		s.dial.mu.Lock()
		defer s.dial.mu.Unlock()
	}
	s.closed.Store(true)
	if s.owned {
		if c := s.conn.Load(); c != nil {
			c.client.Close()
		}
	}
	return nil
}
