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
	"maps"
	"math"
	"sync"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/config"
)

// maxRounds bounds the division rounds a replica runs at once (each makes
// its board calls one after another): the Redis board pipelines
// concurrent calls on one connection, so a tick of many divisions costs
// about two round trips per maxRounds of them.
const maxRounds = 64

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

// The bounds of one bucket id: a report with a bucket id past either is
// refused (InvalidArgument), and the stream ended. Envoy builds a bucket id
// from its configuration's bucket_id_builder: a few entries, each a fixed
// string or a request attribute (a route or tenant name, an API key, a
// client ID), tens of bytes. The bounds leave room for many times that
// while bounding the bucket ids a stream holds, DefaultMaxBuckets of them:
// their keys and values take at most 1 MiB. (A bucket id is kept, once, for
// Envoy needs it back in each assignment; everything else names the bucket
// by its key, at most 64 bytes: see bucketKey.)
const (
	// MaxBucketIDBytes bounds the bytes of a bucket id's keys and values,
	// all told.
	MaxBucketIDBytes = 1024
	// MaxBucketIDEntries bounds the entries of a bucket id.
	MaxBucketIDEntries = 16
)

// checkBucketSize returns why bucket, the bucket id of report entry i, is
// past the bounds, or nil.
func checkBucketSize(i int, bucket map[string]string) error {
	if len(bucket) > MaxBucketIDEntries {
		return status.Errorf(codes.InvalidArgument, "bucket_quota_usages[%d].bucket_id: %d entries, more than the %d a bucket id may have", i, len(bucket), MaxBucketIDEntries)
	}
	n := 0
	for k, v := range bucket {
		n += len(k) + len(v)
	}
	if n > MaxBucketIDBytes {
		return status.Errorf(codes.InvalidArgument, "bucket_quota_usages[%d].bucket_id: %d bytes of keys and values, more than the %d a bucket id may have", i, n, MaxBucketIDBytes)
	}
	return nil
}

// minElapsed is the shortest time over which a stream's demand is
// measured: reports closer together are added to the next one.
const minElapsed = 500 * time.Millisecond

// idleTTLs is how many assignment TTLs a bucket's reports may carry no
// requests before it is abandoned: Envoy forgets a bucket only when told
// to, and reports every bucket it has, so without it a stream's buckets
// would only grow.
const idleTTLs = 6

// silentTTLs is how many assignment TTLs a stream may not report a bucket
// (Envoy reports every one every 5 s) before the bucket stops claiming its
// share: its record then lives out its TTL, and its Envoy's assignment,
// never re-issued, expires with it.
const silentTTLs = 3

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
	slots     chan struct{} // one value per division round in progress (maxRounds)

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
		streams: map[*stream]struct{}{}, divs: map[string]*division{}, drain: make(chan struct{}),
		slots: make(chan struct{}, maxRounds)}
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
	// abandoned holds, for a TTL, when each bucket this stream was told to
	// abandon was: a report of no requests naming it meanwhile crossed the
	// abandon, and does not make it anew.
	abandoned map[string]time.Time

	out    *outbox       // what its sender has yet to send
	quit   chan struct{} // closed by close: the sender stops
	sent   chan struct{} // closed when the sender has stopped
	broken chan error    // a Send's error (the stream is broken)
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
	key    string           // bucketKey: at most 64 bytes
	bucket *rlqspb.BucketId // the one copy of the bucket id, sent back to Envoy
	rule   *config.Rule     // nil: unmatched
	static kind             // allowAll or denyAll for a bucket sluice does not divide
	div    *division        // nil for static buckets

	last    time.Time // the report demand is measured from
	pending uint64    // requests reported since last
	demand  float64   // requests per second; negative: unknown
	used    time.Time // the last report with requests (or the first report)
	heard   time.Time // the last report

	sent     kind
	grant    int64         // tokens per fill interval, when sent == tokens
	fill     time.Duration // the fill interval, when sent == tokens
	changed  time.Time
	issuedAt time.Time
}

// division is one rule's limit for one bucket, divided among the streams
// that report the bucket.
type division struct {
	key    string // the rule's policy name, "\x00" and the bucket key
	bucket string // the bucket key (bucketKey)
	rule   *config.Rule
	// round holds a value while a round (read, claim, assign) of the
	// division is in progress: rounds of a division run one at a time,
	// and hold s.mu only between their board calls.
	round chan struct{}

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
	go st.send()
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
			if err := s.report(st, msg); err != nil {
				return err
			}
		case err := <-errc:
			if err == io.EOF {
				return nil
			}
			return err
		case err := <-st.broken:
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
	st := &stream{id: fmt.Sprintf("%s/%d", s.replica, s.seq), ss: ss, parts: map[string]*part{},
		out: newOutbox(), quit: make(chan struct{}), sent: make(chan struct{}), broken: make(chan error, 1)}
	s.streams[st] = struct{}{}
	if !s.ticking {
		s.ticking = true
		go s.loop()
	}
	return st, nil
}

// close forgets st: its parts leave their divisions under s.mu, and their
// records leave the board at once after it (dropRecords), so the next tick
// gives its shares to the other streams. It returns once st's sender has
// stopped (a Send in progress ends when the Envoy reads or its connection
// ends), since no Send may follow the handler's return.
func (s *Service) close(st *stream) {
	st.out.close()
	s.mu.Lock()
	delete(s.streams, st)
	var drops []record
	now := time.Now()
	for _, p := range st.parts {
		drops = s.leave(p, drops, now)
	}
	s.mu.Unlock()
	s.dropRecords(drops)
	close(st.quit)
	<-st.sent
}

func (s *Service) report(st *stream, msg *rlqspb.RateLimitQuotaUsageReports) error {
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
		if err := checkBucketSize(i, b); err != nil {
			s.mu.Unlock()
			s.stats.refused.Add(1)
			return err
		}
		key := bucketKey(b)
		p := st.parts[key]
		if p == nil && u.GetNumRequestsAllowed()+u.GetNumRequestsDenied() == 0 {
			if at, ok := st.abandoned[key]; ok && now.Sub(at) < s.ttl {
				continue // sent before its Envoy had the abandon: forgotten there
			}
		}
		if p == nil {
			delete(st.abandoned, key)
			if len(st.parts) >= s.maxBkt {
				s.mu.Unlock()
				s.stats.refused.Add(1)
				return status.Errorf(codes.ResourceExhausted, "bucket_quota_usages[%d]: the stream reports %d buckets, the most one stream may", i, len(st.parts))
			}
			// A copy of its entries alone: nothing else the report
			// carried (unknown fields) is kept.
			p = s.newPart(cfg, st, key, &rlqspb.BucketId{Bucket: maps.Clone(b)}, now)
			if p.div != nil {
				touched = append(touched, p.div)
			} else {
				first = append(first, s.issueStatic(p, now))
			}
		}
		s.observe(p, now, u.GetNumRequestsAllowed(), u.GetNumRequestsDenied())
	}
	s.mu.Unlock()
	// Each round delivers its division's assignments when it ends, so a
	// lowered grant goes at once; the report's answer may take more than
	// one response.
	st.out.put(first)
	s.rounds(touched, now, true)
	return nil
}

func (s *Service) newPart(cfg *config.Config, st *stream, key string, bid *rlqspb.BucketId, now time.Time) *part {
	p := &part{st: st, key: key, bucket: bid, demand: Unknown, used: now}
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
		dv = &division{key: dkey, bucket: p.key, parts: map[*part]struct{}{}, replicas: 1, round: make(chan struct{}, 1)}
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

// record names one stream's record in a division on the board.
// record is a stream's record in a division, to drop if it expires no
// later than before (a claim made since keeps it).
type record struct {
	division, stream string
	before           time.Time
}

// leave takes p out of its division at now and adds its record to drops,
// which the caller passes to dropRecords once it has released s.mu: the
// record as claimed up to now (expiring by now + A), not one a part of the
// same bucket and stream claims after it (claims read the clock after the
// part is made). Called with s.mu held.
func (s *Service) leave(p *part, drops []record, now time.Time) []record {
	dv := p.div
	if dv == nil {
		return drops
	}
	p.div = nil
	delete(dv.parts, p)
	if len(dv.parts) == 0 && s.divs[dv.key] == dv {
		delete(s.divs, dv.key)
	}
	return append(drops, record{dv.key, p.st.id, now.Add(s.ttl)})
}

// dropTimeout bounds one Drop: a record that could not be dropped expires
// with its TTL.
const dropTimeout = time.Second

// dropRecords removes records from the board at once, each call under its
// own timeout and all of them at the same time, so that a store that does
// not answer holds the caller for dropTimeout at most. Called without s.mu:
// board calls never hold it.
func (s *Service) dropRecords(drops []record) {
	var wg sync.WaitGroup
	for _, r := range drops {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
			defer cancel()
			if err := s.board.Drop(ctx, r.division, r.stream, r.before); err != nil {
				s.log.Warn("rlqs: dropping a stream's record failed; it expires with its TTL", "division", r.division, "error", err)
			}
		})
	}
	wg.Wait()
}

// rematch places every part again in a new configuration: a part whose
// division (rule name and bucket) is unchanged keeps it, with the new
// rule's numbers; others move, and get a new first assignment.
func (s *Service) rematch(cfg *config.Config, now time.Time, sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction, drops []record) []record {
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
			drops = s.leave(p, drops, time.Now())
			s.place(cfg, p, false)
			switch {
			case p.div != nil:
				p.sent = none // its first assignment in the new division
			case old != nil || p.static != oldStatic || p.rule != oldRule:
				sends[st] = append(sends[st], s.issueStatic(p, now))
			}
		}
	}
	return drops
}

// setRule sets the division's rule and the budget it gives: the rule's
// limit over a fill interval of whole seconds, the rule's period rounded
// up to whole seconds (Envoy reads fill_interval's whole seconds), so that
// the budget is at least the limit (≥ 1) and its rate at most the rule's.
func (dv *division) setRule(r *config.Rule) {
	dv.rule = r
	p := r.Policy.Period
	dv.fill = fillOf(p)
	// limit × fill / period, in floating point: exact enough for the
	// limits a uint32 tokens_per_fill can carry, and never above.
	b := math.Floor(float64(r.Policy.Limit) * float64(dv.fill) / float64(p))
	dv.budget = int64(min(b, math.MaxUint32))
}

// fillOf is the fill interval of a rule of period p: p rounded up to whole
// seconds, at least one.
func fillOf(p time.Duration) time.Duration {
	if p <= time.Second {
		return time.Second
	}
	return (p + time.Second - 1) / time.Second * time.Second
}

// observe adds a report to p's demand.
func (s *Service) observe(p *part, now time.Time, allowed, denied uint64) {
	s.stats.reported(p.rule, allowed, denied)
	if now.Sub(p.heard) >= silentTTLs*s.ttl {
		// Back from silence (or new): measure afresh.
		p.last, p.pending, p.demand = time.Time{}, 0, Unknown
	}
	p.heard = now
	n := allowed + denied
	if n > 0 {
		p.used = now
	}
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
