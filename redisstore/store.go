// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/model"
)

// The general script: take.lua, after the number helpers and one file per
// algorithm that it calls.
var (
	//go:embed big.lua
	bigSource string
	//go:embed pairs.lua
	pairsSource string
	//go:embed take_bucket.lua
	takeBucketSource string
	//go:embed take_fixed.lua
	takeFixedSource string
	//go:embed take_window.lua
	takeWindowSource string
	//go:embed take_log.lua
	takeLogSource string
	//go:embed take_charge.lua
	takeChargeSource string
	//go:embed take.lua
	takeSource string

	takeText = strings.Join([]string{bigSource, pairsSource, takeBucketSource,
		takeFixedSource, takeWindowSource, takeLogSource, takeChargeSource, takeSource}, "\n")
)

// ErrCrossSlot is returned (wrapped) by TakeAll on a Redis Cluster when the
// batch's keys live in more than one hash slot: one script can then not
// apply them atomically, and the store does not pretend to.
var ErrCrossSlot = errors.New("redisstore: the batch's keys are in more than one Redis Cluster hash slot")

// Store is a sluice.Store on Redis or Redis Cluster. It is safe for
// concurrent use. The zero Store has no Redis: every method that returns
// an error fails with one wrapping sluice.ErrStoreClosed, Stats is zero
// and Close does nothing; make one with New or Open.
type Store struct {
	conn    atomic.Pointer[conn] // nil until Open's first connection succeeds
	owned   bool                 // Close closes the client
	dial    *dialer              // for Open: connects on demand
	clock   clock.Clock
	prefix  string
	slot    string
	slack   time.Duration
	ttlArg  string // the script's ARGV[2]: milliseconds added to every TTL
	script  *rueidis.Lua
	timeout time.Duration
	// deadline is the shared deadline context of calls beginning now
	// (begin).
	deadline atomic.Pointer[sharedDeadline]
	// callerDeadline is the shared deadline context of calls bounded by
	// their caller's deadline less margin.
	callerDeadline atomic.Pointer[sharedDeadline]
	margin         time.Duration
	brk            breaker
	recovered      func(failing time.Duration) // WithRecovered
	stats          counters
	closed         atomic.Bool
	tlsConf        *tls.Config             // Open: WithTLSConfig
	wrapConn       func(net.Conn) net.Conn // Open: WithConnWrapper

	mu       sync.RWMutex
	compiled map[sluice.Policy]*compiled

	gathering gathering // gather.go

	generalOnly bool // benchmarks: take.lua decides every request

	fresh freshness // limits.go: the overrides' read barrier
	// guessClock, if set, replaces this process's clock as the guess of
	// Redis TIME for calendar windows (tests of the retry).
	guessClock func() int64
}

var _ sluice.Store = (*Store)(nil)

// errZero is every error of the zero Store (one neither New nor Open
// made): like a closed store, never a reason to admit. compile and
// connection return it, and every method that reads a policy or calls
// Redis passes through one of them first.
var errZero = fmt.Errorf("the zero Store has no Redis (make one with New or Open): %w", sluice.ErrStoreClosed)

// conn is a connected client.
type conn struct {
	client  rueidis.Client
	cluster bool
}

func newConn(c rueidis.Client) *conn {
	return &conn{client: c, cluster: c.Mode() == rueidis.ClientModeCluster}
}

// compiled is a validated policy with what the script needs from it.
type compiled struct {
	model *model.Model
	kind  string // "b", "f", "w" or "l"
	tag   string
	cap   int64 // burst (bucket kinds) or limit
	num   uint64
	den   uint64
	burst [2]string // dur(burst): ns, frac
	one   [2]string // dur(1): ns, frac (bucket kinds with a capacity ≥ 1)
	capS  string
	perS  string
	denS  string
	// The one-request scripts (fast.go): fast is "f", "b" or "" (take.lua
	// only); perUS is the period in µs; for bucket.lua, bv is dur(burst)
	// in 1/den ns (cap × num) and hms its epoch, floor(dur(burst)/1ms) + 1.
	fast  string
	perUS string
	bv    uint64
	bvS   string
	hmsS  string
	numS  string // num: cost 1 (and a peek) in 1/den ns
	overS string // bv + 1: a cost past the burst
	perNS int64  // the period in ns (fixed-window's window)
	// calKind is the script's kind for a calendar policy's windows ("F"
	// or "W"; calendar.go), "" for any other.
	calKind string
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store take the time from c instead of Redis TIME: for
// replaying a trace on its own clock, and for tests. Keys then expire in
// Redis once their state is idle by c's time, plus WithExpirySlack of real
// time, because c need not advance with real time.
//
// By default the time is the Redis server's TIME, read inside the script, so
// that replicas whose clocks disagree still make identical decisions.
func WithClock(c clock.Clock) Option { return func(s *Store) { s.clock = c } }

// WithExpirySlack sets how much real time, beyond the moment a key's state
// becomes idle, Redis keeps it when the store uses WithClock. The default is
// one hour. It has no effect with Redis TIME, where keys expire exactly then.
func WithExpirySlack(d time.Duration) Option { return func(s *Store) { s.slack = d } }

// WithPrefix sets the prefix of every Redis key the store writes. The
// default is "sluice:". It must not contain '{' or '}'.
func WithPrefix(p string) Option { return func(s *Store) { s.prefix = p } }

// WithSingleSlot puts every key of the store into the one Redis Cluster hash
// slot of the hash tag {name}, so that any TakeAll batch is atomic on a
// Cluster, at the price of putting all of the store's keys on one shard.
// Without it, each (policy, key) has its own hash tag and a Cluster spreads
// them over its shards. name must not contain '{' or '}'.
func WithSingleSlot(name string) Option { return func(s *Store) { s.slot = name } }

// WithTLSConfig makes Open use a clone of c for TLS instead of the default
// of a rediss:// URL (the system's roots): to trust a private CA or present
// a client certificate. If c.ServerName is empty, the URL's first host is
// the name verified. Open refuses it with a URL that is not rediss:// or
// rediss+cluster://. With Sentinel it applies to the sentinels and to the
// master. New ignores it: configure TLS on the client.
func WithTLSConfig(c *tls.Config) Option { return func(s *Store) { s.tlsConf = c } }

// WithConnWrapper makes Open pass each TCP connection it makes to Redis (or
// a sentinel) through wrap before using it (and before TLS, if any): for a
// service that wants its own socket handling. By default the connections
// are the standard library's. New ignores it: configure the client's
// dialer.
func WithConnWrapper(wrap func(net.Conn) net.Conn) Option {
	return func(s *Store) { s.wrapConn = wrap }
}

// New returns a store that uses client, which may be a standalone, Sentinel
// or Cluster rueidis client. Close does not close it. A nil client is an
// error.
func New(client rueidis.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: client: must not be nil")
	}
	s, err := configure(opts)
	if err != nil {
		return nil, err
	}
	s.conn.Store(newConn(client))
	return s, nil
}

func configure(opts []Option) (*Store, error) {
	s := &Store{
		prefix:   "sluice:",
		slack:    time.Hour,
		script:   rueidis.NewLuaScript(takeText),
		timeout:  DefaultTimeout,
		margin:   DefaultDeadlineMargin,
		compiled: map[sluice.Policy]*compiled{},
	}
	s.gathering.delay = DefaultGatherDelay
	s.brk.threshold, s.brk.cooldown = DefaultBreakerFailures, DefaultBreakerCooldown
	for _, o := range opts {
		if o == nil {
			continue // a nil option is no option
		}
		o(s)
	}
	if strings.ContainsAny(s.prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q: must not contain '{' or '}'", s.prefix)
	}
	if strings.ContainsAny(s.slot, "{}") {
		return nil, fmt.Errorf("redisstore: single slot %q: must not contain '{' or '}'", s.slot)
	}
	if s.brk.cooldown < 0 {
		return nil, fmt.Errorf("redisstore: breaker cooldown %v: must not be negative", s.brk.cooldown)
	}
	if s.gathering.delay < 0 {
		return nil, fmt.Errorf("redisstore: gather delay %v: must not be negative", s.gathering.delay)
	}
	if s.slack < 0 {
		return nil, fmt.Errorf("redisstore: expiry slack %v: must not be negative", s.slack)
	}
	s.ttlArg = "0"
	if s.clock != nil {
		s.ttlArg = strconv.FormatInt(int64((s.slack+time.Millisecond-1)/time.Millisecond), 10)
	}
	return s, nil
}

func (s *Store) compile(p sluice.Policy) (*compiled, error) {
	if s.compiled == nil {
		return nil, errZero
	}
	s.mu.RLock()
	c, ok := s.compiled[p]
	s.mu.RUnlock()
	if ok {
		return c, nil
	}
	m, err := model.New(p)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	c = &compiled{model: m, tag: policyTag(p), cap: p.Limit, perS: strconv.FormatInt(int64(p.Period), 10), perNS: int64(p.Period)}
	switch p.Algorithm {
	case sluice.FixedWindow:
		c.kind = "f"
	case sluice.SlidingWindow:
		c.kind = "w"
	case sluice.SlidingLog:
		c.kind = "l"
	default:
		c.kind = "b"
		if p.Burst != 0 {
			c.cap = p.Burst
		}
		c.den = uint64(m.Denominator())
		c.num = uint64(p.Period) / (uint64(p.Limit) / c.den)
		ns, frac := c.dur(c.cap)
		c.burst = [2]string{strconv.FormatUint(ns, 10), strconv.FormatUint(frac, 10)}
		if c.cap >= 1 {
			ns, frac := c.dur(1)
			c.one = [2]string{strconv.FormatUint(ns, 10), strconv.FormatUint(frac, 10)}
		}
	}
	c.capS = strconv.FormatInt(c.cap, 10)
	c.denS = strconv.FormatUint(c.den, 10)
	if c.kind == "b" {
		ns, _ := c.dur(c.cap)
		c.hmsS = strconv.FormatUint(ns/1_000_000+1, 10)
		if hi, lo := bits.Mul64(uint64(c.cap), c.num); hi == 0 {
			c.bv, c.bvS = lo, strconv.FormatUint(lo, 10)
			c.numS, c.overS = strconv.FormatUint(c.num, 10), strconv.FormatUint(lo+1, 10)
		}
	}
	c.fast = c.fastKind(p)
	if p.Calendar.Unit != 0 {
		c.calKind, c.fast = strings.ToUpper(c.kind), ""
	}
	c.perUS = strconv.FormatInt(int64(p.Period/1000), 10)
	s.mu.Lock()
	if len(s.compiled) > 4096 {
		clear(s.compiled) // policies built per request: do not grow forever
	}
	s.compiled[p] = c
	s.mu.Unlock()
	return c, nil
}

// dur returns k×Period/Limit nanoseconds as a whole part and a fraction in
// units of 1/den, for 0 ≤ k ≤ the capacity (so the quotient fits).
func (c *compiled) dur(k int64) (ns, frac uint64) {
	hi, lo := bits.Mul64(uint64(k), c.num)
	return bits.Div64(hi, lo, c.den)
}

// Take applies one request; see sluice.Store.
func (s *Store) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	var out [1]sluice.Decision
	if err := s.take(ctx, []sluice.Request{{Policy: p, Key: key, Cost: cost}}, out[:], nil); err != nil {
		return sluice.Decision{}, fmt.Errorf("redisstore: take %q: %w", key, err)
	}
	return out[0], nil
}

// TakeAll applies reqs all-or-nothing; see sluice.Store.
//
// On standalone Redis (and with WithSingleSlot) the whole batch is one
// script, so it is atomic. On a Redis Cluster a batch whose keys are in more
// than one hash slot is refused with ErrCrossSlot before anything is read
// or written: requests for the same policy and key always share a slot, but
// different keys or policies generally do not.
func (s *Store) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	if len(out) != len(reqs) {
		return fmt.Errorf("redisstore: take all: %d requests but room for %d decisions", len(reqs), len(out))
	}
	if len(reqs) == 0 {
		switch {
		case s.closed.Load():
			return fmt.Errorf("redisstore: take all: %w", errClosed)
		case s.compiled == nil:
			return fmt.Errorf("redisstore: take all: %w", errZero)
		}
		return nil
	}
	if err := s.take(ctx, reqs, out, nil); err != nil {
		return fmt.Errorf("redisstore: take all: %w", err)
	}
	return nil
}

const fieldsPerRequest = 9

// scratch is take's working memory, pooled. rueidis copies keys and args
// into its own command, so they are free again once the call returns.
type scratch struct {
	cs     []*compiled
	keys   []string
	args   []string
	states []model.State
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledRequests bounds the batches whose scratch is kept for reuse.
const maxPooledRequests = 256

func (sc *scratch) release() {
	if cap(sc.cs) > maxPooledRequests {
		return
	}
	clear(sc.cs[:cap(sc.cs)])
	clear(sc.keys[:cap(sc.keys)])
	clear(sc.args[:cap(sc.args)])
	clear(sc.states[:cap(sc.states)])
	scratchPool.Put(sc)
}

// take applies reqs; with post non-nil, post[i] receives the state request
// i left (for TakeStamped).
func (s *Store) take(ctx context.Context, reqs []sluice.Request, out []sluice.Decision, post []model.State) error {
	if len(reqs) == 1 && reqs[0].Cost >= 0 && !reqs[0].Force && !s.closed.Load() && !s.generalOnly {
		c, err := s.compile(reqs[0].Policy)
		if err != nil {
			return err
		}
		if c.fast != "" {
			d, done, err := s.takeFast(ctx, c, reqs[0].Key, reqs[0].Cost, post)
			if done {
				out[0] = d
				return err
			}
		}
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	cs, keys := slices.Grow(sc.cs[:0], len(reqs)), slices.Grow(sc.keys[:0], 2*len(reqs))
	args := append(slices.Grow(sc.args[:0], 3+fieldsPerRequest*len(reqs)), "", s.ttlArg, strconv.Itoa(len(reqs)))
	calendars, guess := false, int64(0)
	for i, r := range reqs {
		if r.Cost < 0 {
			return fmt.Errorf("request %d (%q): cost %d: must not be negative", i, r.Key, r.Cost)
		}
		c, err := s.compile(r.Policy)
		if err != nil {
			return err
		}
		cs = append(cs, c)
		st, lg := stateKey(s.prefix, s.slot, c.tag, r.Key)
		keys = append(keys, st, lg)
		durNS, durFrac := "0", "0"
		costArg := strconv.FormatInt(r.Cost, 10)
		switch {
		case r.Force: // a charge (charge.go)
			costArg, durNS, durFrac = chargeArgs(c, r.Cost)
		case c.kind != "b" || r.Cost > c.cap:
		case r.Cost <= 1: // a peek is judged as cost 1
			durNS, durFrac = c.one[0], c.one[1]
		default:
			ns, frac := c.dur(r.Cost)
			durNS, durFrac = strconv.FormatUint(ns, 10), strconv.FormatUint(frac, 10)
		}
		args = append(args, c.kind, costArg, c.capS, c.perS,
			durNS, durFrac, c.burst[0], c.burst[1], c.denS)
		if c.calKind != "" {
			if !calendars {
				calendars, guess = true, s.calendarGuess()
			}
			setWindow(args[len(args)-fieldsPerRequest:], c, guess)
		}
	}
	sc.cs, sc.keys, sc.args = cs, keys, args
	if s.closed.Load() {
		return errClosed
	}
	cn, err := s.connection(ctx)
	if err != nil {
		return err
	}
	if cn.cluster && s.slot == "" {
		slot := keySlot(keys[0])
		for _, k := range keys[1:] {
			if keySlot(k) != slot {
				return ErrCrossSlot
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.clock != nil {
		now := min(max(s.clock.Now().UnixNano(), 0), model.MaxTime)
		args[0] = strconv.FormatInt(now, 10)
	}
	var reply []rueidis.RedisMessage
	var now int64
	for try := 1; ; try++ {
		callCtx, c, err := s.begin(ctx)
		if err != nil {
			return err
		}
		reply, err = s.script.Exec(callCtx, cn.client, keys, args).ToArray()
		if err := s.end(ctx, c, err); err != nil {
			return err
		}
		if n := 2 + 4*len(reqs); len(reply) != n && (len(reply) != n+4*len(reqs) || str(reply[1]) != "0") {
			return fmt.Errorf("script returned %d values, want %d", len(reply), n)
		}
		now, err = strconv.ParseInt(str(reply[0]), 10, 64)
		if err != nil {
			return fmt.Errorf("script returned the time %q: %v", str(reply[0]), err)
		}
		if !calendars || str(reply[1]) != "2" {
			break
		}
		if try == maxCalendarTries {
			return fmt.Errorf("calendar windows missed the script's clock %d times in a row", try)
		}
		// Draw each calendar window where the script decides: at its
		// time, or the stored window's start if that is later.
		for i, c := range cs {
			if c.calKind != "" {
				at, _ := strconv.ParseInt(str(reply[2+4*i]), 10, 64)
				setWindow(args[3+fieldsPerRequest*i:], c, max(now, at))
			}
		}
	}
	committed := str(reply[1]) == "1"
	// Each request's decision is the model's on the state it saw.
	states := sc.states[:0]
	all := true
	for i, r := range reqs {
		f := reply[2+4*i : 6+4*i]
		st, err := cs[i].state([4]string{str(f[0]), str(f[1]), str(f[2]), str(f[3])})
		if err != nil {
			return err
		}
		states = append(states, st)
		var next model.State
		if r.Force {
			next, out[i] = cs[i].model.Charge(st, now, r.Cost)
		} else {
			next, out[i] = cs[i].model.Take(st, now, r.Cost)
			all = all && out[i].Allowed
		}
		if post != nil {
			post[i] = next
		}
	}
	sc.states = states
	if all != committed {
		return fmt.Errorf("internal error: the script (committed %v) and the model (admitted %v) disagree", committed, all)
	}
	if !committed {
		// Nothing was written: an admitted request's decision (and a
		// charge's) is a peek on its key's stored state, which the script
		// reported after the states seen, as the request's policy reads it
		// (another policy of the same name, with another denominator or
		// period, reads it otherwise).
		if len(reply) != 2+8*len(reqs) {
			return fmt.Errorf("script returned %d values for a refused batch, want %d", len(reply), 2+8*len(reqs))
		}
		for i, r := range reqs {
			if !out[i].Allowed && !r.Force {
				continue
			}
			f := reply[2+4*len(reqs)+4*i : 6+4*len(reqs)+4*i]
			st, err := cs[i].state([4]string{str(f[0]), str(f[1]), str(f[2]), str(f[3])})
			if err != nil {
				return err
			}
			_, out[i] = cs[i].model.Take(st, now, 0)
		}
	}
	return nil
}

// str is a reply element as rueidis's AsStrSlice has it: "" unless it is
// a string.
func str(m rueidis.RedisMessage) string {
	s, _ := m.ToString()
	return s
}

// state converts the script's view of a key's state into a model.State
// on which the model makes the same decision as on the real one.
func (c *compiled) state(f [4]string) (model.State, error) {
	var v [4]int64
	for i, x := range f {
		if x == "" {
			continue
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return model.State{}, fmt.Errorf("script returned state field %q: %v", x, err)
		}
		v[i] = n
	}
	switch c.kind {
	case "b":
		return model.State{Time: v[0], Frac: v[1]}, nil
	case "f":
		return model.State{Time: v[0], Count: v[1]}, nil
	case "w":
		return model.State{Time: v[0], Count: v[1], Prev: v[2]}, nil
	}
	// Sliding log: the live entries summarized. used = v[0] units, the last
	// admitted at v[1]; on a rejection that can succeed later, the oldest
	// entries up to the one at v[2] hold v[3] units, and their leaving makes
	// room.
	used, last := uint64(v[0]), v[1]
	if used == 0 {
		return model.State{}, nil
	}
	if f[2] != "" && uint64(v[3]) < used {
		return model.State{Log: []model.LogEntry{{At: v[2], Total: uint64(v[3])}, {At: last, Total: used}}}, nil
	}
	return model.State{Log: []model.LogEntry{{At: last, Total: used}}}, nil
}
