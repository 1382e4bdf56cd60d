// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// The one-request scripts: a Take (or TakeStamped) of a fixed-window or
// bucket-kind policy inside their exact range is decided by fixed.lua or
// bucket.lua, functions of one screen that work in plain doubles, instead
// of take.lua's general path. Each decides exactly as the model does;
// outside its range (checked here, or by the script on a state written
// under other parameters, when it answers "?") take.lua decides.
//
// singles.lua runs them: one call decides a list of such requests, each on
// its own, so that concurrent Takes share one script call (gather.go).
var (
	//go:embed fixed.lua
	fixedSource string
	//go:embed bucket.lua
	bucketSource string
	//go:embed singles.lua
	singlesSource string

	// singlesText is the script singles.lua with the functions it calls.
	singlesText   = fixedSource + "\n" + bucketSource + "\n" + singlesSource
	singlesScript = rueidis.NewLuaScript(singlesText)
)

// exact is 2⁵³: doubles hold every whole number below it.
const exact = 1 << 53

// fastKind returns c's one-request script kind ("f" or "b"), or "" when
// the policy is outside the scripts' exact range, where every number they
// compute stays below 2⁵³ (2n+1 too, for a count or debt n they reply):
// for fixed-window a Period of whole microseconds and a Limit below 2⁵²;
// for the bucket kinds H ms × den and the burst in 1/den ns (bv) below
// 2⁵², where H is bucket.lua's epoch (dur(burst) in whole ms, plus 1) and
// den the denominator. (A sum past 2⁵³ that bucket.lua meets is left to
// take.lua.)
func (c *compiled) fastKind(p sluice.Policy) string {
	switch c.kind {
	case "f":
		if p.Period%1000 == 0 && p.Limit < exact/2 {
			return "f"
		}
	case "b":
		ns, _ := c.dur(c.cap)
		hms := ns/1_000_000 + 1
		if c.den < exact/2 && c.bv != 0 && c.bv < exact/2 && hms < exact/2/1_000_000/c.den {
			return "b"
		}
	}
	return ""
}

// fastArgs appends to a the request's kind and arguments for singles.lua:
// requests with equal arguments go in one group.
func (c *compiled) fastArgs(a []string, cost int64) []string {
	if c.fast == "f" {
		return append(a, "f", strconv.FormatInt(min(cost, c.cap+1), 10), c.capS, c.perUS)
	}
	// The judged cost in 1/den ns: c×num (a peek is judged as cost 1; a
	// cost past the burst as bv+1, which no request fits in, written never).
	judged, write := max(cost, 1), "1"
	if cost == 0 {
		write = "0"
	}
	cv := c.numS // judged 1: no formatting on the common path
	switch {
	case judged > c.cap:
		cv, write = c.overS, "0"
	case judged > 1:
		cv = strconv.FormatUint(uint64(judged)*c.num, 10)
	}
	return append(a, "b", cv, c.denS, c.bvS, c.hmsS, write)
}

// takeFast decides one request with singles.lua. done is false when the
// script left the decision to take.lua (nothing was written).
func (s *Store) takeFast(ctx context.Context, c *compiled, key string, cost int64, post []model.State) (d sluice.Decision, done bool, err error) {
	cn, err := s.connection(ctx)
	if err != nil {
		return d, true, err
	}
	if err := ctx.Err(); err != nil {
		return d, true, err
	}
	m := singlePool.Get().(*single)
	m.key, _ = stateKey(s.prefix, s.slot, c.tag, key)
	m.args = c.fastArgs(m.args[:0], cost)
	callCtx, call, err := s.begin(ctx)
	if err != nil {
		singlePool.Put(m)
		return d, true, err
	}
	m.ctx, m.quit = callCtx, ctx.Done()
	err = s.gather(cn, m, ctx)
	if err := s.end(ctx, call, err); err != nil {
		// m may still be in a batch in flight: it is not reused.
		return d, true, err
	}
	defer m.release()
	now := m.sec*1e9 + m.nsec
	state, admitted, ok, err := c.fastState(m.reply, now)
	if err != nil || !ok {
		return d, ok || err != nil, err // !ok: take.lua decides
	}
	next, d := c.model.Take(state, now, cost)
	if post != nil {
		post[0] = next
	}
	if d.Allowed != admitted {
		return d, true, fmt.Errorf("internal error: the script (admitted %v) and the model (admitted %v) disagree", admitted, d.Allowed)
	}
	return d, true, nil
}

// fastState reads a request's reply from singles.lua at now: the state the
// script read and whether it admitted, or ok false when it left the
// decision to take.lua. The reply is 2n+admitted for a fixed window's
// count n in the window of now, or a bucket's debt n (TAT − now, in ns);
// or "n admitted f" for a debt with a fraction f; or −1.
func (c *compiled) fastState(r rueidis.RedisMessage, now int64) (st model.State, admitted, ok bool, err error) {
	var n, frac int64
	if v, err := r.AsInt64(); err == nil {
		if v == -1 {
			return st, false, false, nil
		}
		n, admitted = v>>1, v&1 == 1
	} else {
		var a int64
		s, err := r.ToString()
		if err == nil {
			n, a, frac, err = threeInts(s)
		}
		if err != nil || n < 0 || frac <= 0 {
			return st, false, false, fmt.Errorf("script returned %q: want a count or a debt", r.String())
		}
		admitted = a == 1
	}
	if n < 0 {
		return st, false, false, fmt.Errorf("script returned %d: want a count or a debt", n)
	}
	if n == 0 && frac == 0 {
		return st, admitted, true, nil // no state, or one the model reads as none
	}
	if c.kind == "f" {
		return model.State{Time: now - now%c.perNS, Count: n}, admitted, true, nil
	}
	return model.State{Time: now + n, Frac: frac}, admitted, true, nil
}

// threeInts parses "a b c", three decimal integers.
func threeInts(s string) (a, b, c int64, err error) {
	as, rest, ok1 := strings.Cut(s, " ")
	bs, cs, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 {
		return 0, 0, 0, fmt.Errorf("want three numbers: %q", s)
	}
	if a, err = strconv.ParseInt(as, 10, 64); err == nil {
		if b, err = strconv.ParseInt(bs, 10, 64); err == nil {
			c, err = strconv.ParseInt(cs, 10, 64)
		}
	}
	return a, b, c, err
}

// single is one request for singles.lua, and the Take that waits for it.
type single struct {
	key  string
	args []string        // its kind and arguments
	ctx  context.Context // begin's: bounds the wait, and the call
	quit <-chan struct{} // the caller's Done: ends the wait, not the call
	done chan struct{}   // gather's batch sends on it when it has an outcome
	// The outcome: the script's time and the request's value; or err.
	sec, nsec int64
	reply     rueidis.RedisMessage
	err       error
}

var singlePool = sync.Pool{New: func() any { return &single{done: make(chan struct{}, 1)} }}

func (m *single) release() {
	m.ctx, m.quit, m.reply, m.err = nil, nil, rueidis.RedisMessage{}, nil
	singlePool.Put(m)
}

// exec decides ms in one call of singles.lua, bounded by ctx, and records
// each one's outcome in it. Requests in a row with equal arguments go as
// one group: its arguments once, and its keys.
func (s *Store) exec(ctx context.Context, cn *conn, ms []*single) {
	if s.closed.Load() {
		// Close came while these waited to be sent (in a batch): they
		// are not sent.
		for _, m := range ms {
			m.err = errClosed
		}
		return
	}
	keys := make([]string, len(ms))
	args := make([]string, 3, 16)
	args[2] = s.ttlArg
	if s.clock != nil {
		now := min(max(s.clock.Now().UnixNano(), 0), model.MaxTime)
		args[0], args[1] = strconv.FormatInt(now/1e9, 10), strconv.FormatInt(now%1e9, 10)
	}
	for i := 0; i < len(ms); {
		g := ms[i].args
		j := i + 1
		for j < len(ms) && slices.Equal(ms[j].args, g) {
			j++
		}
		args = append(args, g[0], strconv.Itoa(j-i))
		args = append(args, g[1:]...)
		for ; i < j; i++ {
			keys[i] = ms[i].key
		}
	}
	reply, err := singlesScript.Exec(ctx, cn.client, keys, args).ToArray()
	var sec, nsec int64
	if err == nil && len(reply) != 2+len(ms) {
		err = fmt.Errorf("script returned %d values, want %d", len(reply), 2+len(ms))
	}
	if err == nil {
		sec, err = reply[0].AsInt64()
		if err == nil {
			nsec, err = reply[1].AsInt64()
		}
		if err != nil {
			err = fmt.Errorf("script returned the time: %v", err)
		}
	}
	for i, m := range ms {
		if m.err = err; err == nil {
			m.sec, m.nsec = sec, nsec
			m.reply = reply[2+i]
		}
	}
}
