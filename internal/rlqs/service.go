// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/config"
)

// Defaults of the Service's options.
const (
	// DefaultTick is how often a replica re-divides the buckets its streams
	// report and refreshes their assignments.
	DefaultTick = time.Second
	// DefaultTTL is the assignments' time to live (Envoy reads whole
	// seconds). Assignments are re-issued when half of it has passed.
	DefaultTTL = 10 * time.Second
	// DefaultBurstWindow sizes each assignment's token bucket: max_tokens
	// is its rate over this window (at least 1).
	DefaultBurstWindow = 250 * time.Millisecond
	// DefaultMaxStreams bounds the streams one replica serves at once.
	DefaultMaxStreams = 10000
	// DefaultMaxBuckets bounds the buckets one stream may report.
	DefaultMaxBuckets = 1000
)

// minElapsed is the shortest time over which a stream's demand is
// measured: reports closer together are added to the next one.
const minElapsed = 500 * time.Millisecond

// Stream is the server side of one RLQS stream.
type Stream = grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]

// Service answers Envoy's rate limit quota service
// (envoy.service.rate_limit_quota.v3) from sluice's configuration. Create
// it with New; it is safe for concurrent use.
type Service struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer

	config  func() *config.Config
	board   Board
	log     *slog.Logger
	replica string
	tick    time.Duration
	ttl     time.Duration
	burst   time.Duration
	maxStr  int
	maxBkt  int
	match   matchers

	drain     chan struct{} // closed by Drain
	drainOnce sync.Once

	mu      sync.Mutex
	seq     uint64
	streams map[*stream]struct{}
	divs    map[string]*division
	placed  *config.Config // the configuration parts were last placed in
	ticking bool
	stats   stats
}

// Option configures a Service.
type Option func(*Service)

// WithBoard sets where divisions are kept (default NewMemoryBoard(): one
// replica).
func WithBoard(b Board) Option { return func(s *Service) { s.board = b } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithReplicaID names this replica in the board (default random).
func WithReplicaID(id string) Option { return func(s *Service) { s.replica = id } }

// WithTick sets how often buckets are re-divided (DefaultTick).
func WithTick(d time.Duration) Option { return func(s *Service) { s.tick = d } }

// WithTTL sets the assignments' time to live (DefaultTTL), in whole
// seconds, at least 2.
func WithTTL(d time.Duration) Option { return func(s *Service) { s.ttl = d } }

// WithBurstWindow sizes the assignments' token buckets (DefaultBurstWindow).
func WithBurstWindow(d time.Duration) Option { return func(s *Service) { s.burst = d } }

// WithLimits bounds the streams of this replica and the buckets of one
// stream (DefaultMaxStreams, DefaultMaxBuckets where ≤ 0).
func WithLimits(streams, buckets int) Option {
	return func(s *Service) { s.maxStr, s.maxBkt = streams, buckets }
}

// New returns a Service that divides the rules of the configuration cfg
// returns (read at each report and tick, so reloads apply).
func New(cfg func() *config.Config, opts ...Option) (*Service, error) {
	if cfg == nil {
		return nil, errors.New("rlqs: config is nil")
	}
	s := &Service{config: cfg, log: slog.Default(), tick: DefaultTick, ttl: DefaultTTL, burst: DefaultBurstWindow,
		streams: map[*stream]struct{}{}, divs: map[string]*division{}, drain: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	if s.board == nil {
		s.board = NewMemoryBoard()
	}
	if s.replica == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		s.replica = hex.EncodeToString(b[:])
	}
	if s.maxStr <= 0 {
		s.maxStr = DefaultMaxStreams
	}
	if s.maxBkt <= 0 {
		s.maxBkt = DefaultMaxBuckets
	}
	switch {
	case s.tick <= 0:
		return nil, fmt.Errorf("rlqs: tick %v: must be positive", s.tick)
	case s.ttl < 2*time.Second || s.ttl%time.Second != 0:
		return nil, fmt.Errorf("rlqs: ttl %v: must be a whole number of seconds, at least 2s (Envoy reads whole seconds)", s.ttl)
	case s.burst <= 0:
		return nil, fmt.Errorf("rlqs: burst window %v: must be positive", s.burst)
	}
	s.stats.init()
	return s, nil
}

// Register registers s as envoy.service.rate_limit_quota.v3.RateLimitQuotaService on g.
func (s *Service) Register(g grpc.ServiceRegistrar) {
	rlqspb.RegisterRateLimitQuotaServiceServer(g, s)
}

// stream is one open RLQS stream.
type stream struct {
	id     string
	ss     Stream
	domain string
	parts  map[string]*part // by bucketKey
	sendMu sync.Mutex
	ended  bool // guarded by sendMu: the handler has returned
}

func (st *stream) send(actions []*rlqspb.RateLimitQuotaResponse_BucketAction) error {
	if len(actions) == 0 {
		return nil
	}
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if st.ended {
		return nil // a tick's sends to a stream that has just ended
	}
	return st.ss.Send(&rlqspb.RateLimitQuotaResponse{BucketAction: actions})
}

// kind is what a part's last assignment was.
type kind uint8

const (
	none kind = iota
	allowAll
	denyAll
	tokens
)

// part is one stream's bucket.
type part struct {
	st     *stream
	key    string // bucketKey
	bucket *rlqspb.BucketId
	rule   *config.Rule // nil: unmatched
	static kind         // allowAll or denyAll for a bucket sluice does not divide
	div    *division    // nil for static buckets

	last    time.Time // the report demand is measured from
	pending uint64    // requests reported since last
	demand  float64   // requests per second; negative: unknown

	sent     kind
	grant    int64 // tokens per fill interval, when sent == tokens
	changed  time.Time
	issuedAt time.Time
}

// division is one rule's limit for one bucket, divided among the streams
// that report the bucket.
type division struct {
	key     string
	rule    *config.Rule
	fill    time.Duration // whole seconds
	budget  int64         // tokens per fill
	parts   map[*part]struct{}
	failing bool

	// From the last successful division, for metrics.
	fleetDemand float64
	fleetGrant  int64
	replicas    int
	// held is the sum of the grants this replica's streams were given at
	// its last successful claim: what FailLocal divides among them while
	// the store fails (0 before any).
	held int64
}

// StreamRateLimitQuotas implements the RLQS stream: every report updates
// the demand of its buckets; a bucket's first report is answered at once;
// assignments change at ticks.
func (s *Service) StreamRateLimitQuotas(ss Stream) error {
	st, err := s.open(ss)
	if err != nil {
		return err
	}
	defer s.close(st)
	ctx := ss.Context()
	msgs := make(chan *rlqspb.RateLimitQuotaUsageReports)
	errc := make(chan error, 1)
	go func() {
		for {
			msg, err := ss.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- msg:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case msg := <-msgs:
			if err := s.report(ctx, st, msg); err != nil {
				return err
			}
		case err := <-errc:
			if err == io.EOF {
				return nil
			}
			return err
		case <-s.drain:
			return status.Error(codes.Unavailable, "rlqs: this sluice replica is shutting down; reconnect")
		}
	}
}

// Drain ends every stream (UNAVAILABLE: Envoy reconnects, through its load
// balancer, to another replica) and refuses new ones, so that a graceful
// shutdown need not wait for streams that never end on their own. Their
// records leave the store at once.
func (s *Service) Drain() { s.drainOnce.Do(func() { close(s.drain) }) }

func (s *Service) open(ss Stream) (*stream, error) {
	select {
	case <-s.drain:
		return nil, status.Error(codes.Unavailable, "rlqs: this sluice replica is shutting down")
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.streams) >= s.maxStr {
		s.stats.refused.Add(1)
		return nil, status.Errorf(codes.ResourceExhausted, "rlqs: %d streams open, the most this replica serves", len(s.streams))
	}
	s.seq++
	st := &stream{id: fmt.Sprintf("%s/%d", s.replica, s.seq), ss: ss, parts: map[string]*part{}}
	s.streams[st] = struct{}{}
	if !s.ticking {
		s.ticking = true
		go s.loop()
	}
	return st, nil
}

// close forgets st: its records leave the board at once, so the next tick
// gives its shares to the other streams.
func (s *Service) close(st *stream) {
	st.sendMu.Lock()
	st.ended = true
	st.sendMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams, st)
	for _, p := range st.parts {
		s.leave(p)
	}
}

func (s *Service) report(ctx context.Context, st *stream, msg *rlqspb.RateLimitQuotaUsageReports) error {
	now := time.Now()
	switch d := msg.GetDomain(); {
	case st.domain == "" && d == "":
		return status.Error(codes.InvalidArgument, "domain: must be set in a stream's first report")
	case st.domain == "":
		st.domain = d
	case d != "" && d != st.domain:
		return status.Errorf(codes.InvalidArgument, "domain %q: the stream's domain is %q (open a new stream for another domain)", d, st.domain)
	}
	cfg := s.config()
	s.mu.Lock()
	var (
		first   []*rlqspb.RateLimitQuotaResponse_BucketAction
		touched []*division
	)
	for i, u := range msg.GetBucketQuotaUsages() {
		b := u.GetBucketId().GetBucket()
		if len(b) == 0 {
			s.mu.Unlock()
			return status.Errorf(codes.InvalidArgument, "bucket_quota_usages[%d].bucket_id: must have at least one entry", i)
		}
		key := bucketKey(b)
		p := st.parts[key]
		if p == nil {
			if len(st.parts) >= s.maxBkt {
				s.mu.Unlock()
				s.stats.refused.Add(1)
				return status.Errorf(codes.ResourceExhausted, "bucket_quota_usages[%d]: the stream reports %d buckets, the most one stream may", i, len(st.parts))
			}
			p = s.newPart(cfg, st, key, u.GetBucketId())
			if p.div != nil {
				touched = append(touched, p.div)
			} else {
				first = append(first, s.issueStatic(p, now))
			}
		}
		s.observe(p, now, u.GetNumRequestsAllowed(), u.GetNumRequestsDenied())
	}
	sends := map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction{}
	sends[st] = first
	for _, dv := range touched {
		s.divide(ctx, dv, now, sends)
	}
	s.mu.Unlock()
	return s.deliver(st, sends)
}

// deliver sends each stream its actions; an error sending to self is
// returned (the stream is broken), others' are left to their own handlers.
func (s *Service) deliver(self *stream, sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction) error {
	var err error
	for st, acts := range sends {
		if e := st.send(acts); e != nil && st == self {
			err = e
		}
	}
	return err
}

func (s *Service) newPart(cfg *config.Config, st *stream, key string, bid *rlqspb.BucketId) *part {
	p := &part{st: st, key: key, bucket: bid, demand: Unknown}
	st.parts[key] = p
	s.place(cfg, p, true)
	return p
}

// place matches p's bucket in cfg and puts p in its division, or makes it
// static (unmatched, unlimited, deny...). counted counts an unmatched
// bucket.
func (s *Service) place(cfg *config.Config, p *part, counted bool) {
	var r *config.Rule
	if cfg != nil {
		r, _ = s.match.get(cfg).match(p.st.domain, p.bucket.GetBucket())
	}
	p.rule, p.div = r, nil
	switch {
	case r == nil:
		p.static = allowAll
		if counted {
			d := p.st.domain
			if cfg == nil || !cfg.HasDomain(d) {
				d = "" // the client names domains: only configured ones are labels
			}
			s.stats.unmatched(d)
		}
		return
	case r.Deny:
		p.static = denyAll
		return
	case !divisible(r):
		p.static = allowAll
		return
	}
	dkey := r.Policy.Name + "\x00" + p.key
	dv := s.divs[dkey]
	if dv == nil {
		dv = &division{key: dkey, parts: map[*part]struct{}{}, replicas: 1}
		s.divs[dkey] = dv
	}
	if dv.rule != r {
		dv.setRule(r)
	}
	dv.parts[p] = struct{}{}
	p.div = dv
}

// divisible reports whether sluice divides r's limit (else its buckets
// get a blanket rule).
func divisible(r *config.Rule) bool {
	return r != nil && !r.Deny && !r.Unlimited && r.InFlight == nil && !r.ShadowMode && r.Policy.Limit > 0
}

// leave takes p out of its division: its record leaves the board at once.
func (s *Service) leave(p *part) {
	dv := p.div
	if dv == nil {
		return
	}
	p.div = nil
	delete(dv.parts, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.board.Drop(ctx, dv.key, p.st.id); err != nil {
		s.log.Warn("rlqs: dropping a stream's record failed; it expires with its TTL", "division", dv.key, "error", err)
	}
	if len(dv.parts) == 0 {
		delete(s.divs, dv.key)
	}
}

// rematch places every part again in a new configuration: a part whose
// division (rule name and bucket) is unchanged keeps it, with the new
// rule's numbers; others move, and get a new first assignment.
func (s *Service) rematch(cfg *config.Config, now time.Time, sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction) {
	for st := range s.streams {
		for _, p := range st.parts {
			old := p.div
			r, _ := s.match.get(cfg).match(st.domain, p.bucket.GetBucket())
			if old != nil && divisible(r) && r.Policy.Name+"\x00"+p.key == old.key {
				p.rule = r
				if old.rule != r {
					old.setRule(r)
				}
				continue
			}
			oldStatic, oldRule := p.static, p.rule
			s.leave(p)
			s.place(cfg, p, false)
			switch {
			case p.div != nil:
				p.sent = none // its first assignment in the new division
			case old != nil || p.static != oldStatic || p.rule != oldRule:
				sends[st] = append(sends[st], s.issueStatic(p, now))
			}
		}
	}
}

// setRule sets the division's rule and the budget it gives: the rule's
// limit over a fill interval of whole seconds (the rule's period when it is
// whole seconds, else one second).
func (dv *division) setRule(r *config.Rule) {
	dv.rule = r
	p := r.Policy.Period
	dv.fill = time.Second
	if p > 0 && p%time.Second == 0 {
		dv.fill = p
	}
	// limit × fill / period, in floating point: exact enough for the
	// limits a uint32 tokens_per_fill can carry, and never above.
	b := math.Floor(float64(r.Policy.Limit) * float64(dv.fill) / float64(p))
	dv.budget = int64(min(b, math.MaxUint32))
}

// observe adds a report to p's demand.
func (s *Service) observe(p *part, now time.Time, allowed, denied uint64) {
	s.stats.reported(p.rule, allowed, denied)
	n := allowed + denied
	if p.last.IsZero() {
		p.last = now
		return
	}
	p.pending += n
	if el := now.Sub(p.last); el >= minElapsed {
		p.demand = float64(p.pending) / el.Seconds()
		p.pending = 0
		p.last = now
	}
}
