// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// The one-request scripts: a Take (or TakeStamped) of a fixed-window or
// bucket-kind policy inside their exact range runs a script of one screen
// that works in plain doubles, instead of take.lua's general path. Each
// decides exactly as the model does; outside its range (checked here, or by
// the script on a state written under other parameters, when it answers
// "?") take.lua decides.
var (
	//go:embed fixed.lua
	fixedSource string
	//go:embed bucket.lua
	bucketSource string

	fixedScript  = rueidis.NewLuaScript(fixedSource)
	bucketScript = rueidis.NewLuaScript(bucketSource)
)

// exact is 2⁵³: doubles hold every whole number below it.
const exact = 1 << 53

// fastKind returns c's one-request script kind ("f" or "b"), or "" when
// the policy is outside the scripts' exact range: for fixed-window a
// Period of whole microseconds and a Limit below 2⁵³; for the bucket kinds
// a burst duration and a denominator below 2⁵².
func (c *compiled) fastKind(p sluice.Policy) string {
	switch c.kind {
	case "f":
		if p.Period%1000 == 0 && p.Limit < exact {
			return "f"
		}
	case "b":
		ns, _ := c.dur(c.cap)
		if ns < exact/2 && c.den < exact/2 {
			return "b"
		}
	}
	return ""
}

// takeFast decides one request with a one-request script. done is false
// when the script left the decision to take.lua (nothing was written).
func (s *Store) takeFast(ctx context.Context, c *compiled, key string, cost int64, post []model.State) (d sluice.Decision, done bool, err error) {
	cn, err := s.connection(ctx)
	if err != nil {
		return d, true, err
	}
	st, _ := stateKey(s.prefix, s.slot, c.tag, key)
	if err := ctx.Err(); err != nil {
		return d, true, err
	}
	var now int64
	if s.clock != nil {
		now = min(max(s.clock.Now().UnixNano(), 0), sluice.MaxTime)
	}
	var script *rueidis.Lua
	var args []string
	judged := max(cost, 1) // a peek is judged as cost 1
	if c.fast == "f" {
		script = fixedScript
		nowArg := ""
		if s.clock != nil {
			nowArg = strconv.FormatInt(now/1000, 10)
		}
		args = []string{nowArg, strconv.FormatInt(min(cost, c.cap+1), 10), c.capS, c.perUS, s.ttlArg}
	} else {
		script = bucketScript
		sec, nsec := "", ""
		if s.clock != nil {
			sec, nsec = strconv.FormatInt(now/1e9, 10), strconv.FormatInt(now%1e9, 10)
		}
		durNS, durFrac := c.one[0], c.one[1]
		switch {
		case judged > c.cap: // impossible: refused, and nothing written
			durNS, durFrac = c.overBurst, "0"
		case judged > 1:
			ns, frac := c.dur(judged)
			durNS, durFrac = strconv.FormatUint(ns, 10), strconv.FormatUint(frac, 10)
		}
		costArg := "1"
		if cost == 0 {
			costArg = "0"
		}
		args = []string{sec, nsec, durNS, durFrac, c.burst[0], c.burst[1], c.denS, costArg, s.ttlArg}
	}
	callCtx, call, err := s.begin(ctx)
	if err != nil {
		return d, true, err
	}
	reply, err := script.Exec(callCtx, cn.client, []string{st}, args).ToArray()
	if err := s.end(ctx, call, err); err != nil {
		return d, true, err
	}
	if len(reply) == 1 {
		return d, false, nil // "?": take.lua decides
	}
	var state model.State
	var admitted bool
	if c.fast == "f" {
		if len(reply) != 4 {
			return d, true, fmt.Errorf("script returned %d values, want 4", len(reply))
		}
		us, err := reply[0].AsInt64()
		if err != nil {
			return d, true, fmt.Errorf("script returned the time: %v", err)
		}
		if s.clock == nil {
			now = us * 1000
		}
		admitted = str(reply[1]) == "1" || isOne(reply[1])
		state, err = c.state([4]string{str(reply[2]), str(reply[3]), "", ""})
		if err != nil {
			return d, true, err
		}
	} else {
		if len(reply) != 5 {
			return d, true, fmt.Errorf("script returned %d values, want 5", len(reply))
		}
		sec, err1 := reply[0].AsInt64()
		nsec, err2 := reply[1].AsInt64()
		if err1 != nil || err2 != nil {
			return d, true, fmt.Errorf("script returned the time: %v, %v", err1, err2)
		}
		if s.clock == nil {
			now = sec*1e9 + nsec
		}
		admitted = isOne(reply[2])
		state, err = c.state([4]string{str(reply[3]), str(reply[4]), "", ""})
		if err != nil {
			return d, true, err
		}
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

// isOne reports whether m is the integer 1.
func isOne(m rueidis.RedisMessage) bool {
	n, err := m.AsInt64()
	return err == nil && n == 1
}
