// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/model"
)

//go:embed give.lua
var giveSource string

// giveScript is give.lua after the number helpers and take_bucket.lua,
// whose load and save it uses.
var giveScript = rueidis.NewLuaScript(strings.Join([]string{bigSource, pairsSource, takeBucketSource, giveSource}, "\n"))

var _ lease.Giver = (*Store)(nil)

// TakeStamped is Take that also returns the key's state after the take, for
// Give. It costs the same one round trip. A take that writes nothing (a
// peek, a refusal) may return, in place of the state stored, one that the
// model treats the same from the take's instant on (an earlier window's
// count as none).
func (s *Store) TakeStamped(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, model.State, error) {
	var (
		out  [1]sluice.Decision
		post [1]model.State
	)
	if err := s.take(ctx, []sluice.Request{{Policy: p, Key: key, Cost: cost}}, out[:], post[:]); err != nil {
		return sluice.Decision{}, model.State{}, fmt.Errorf("redisstore: take %q: %w", key, err)
	}
	return out[0], post[0], nil
}

// Give gives back units of a take whose stamp (from TakeStamped) is given,
// where model.Model.Give says it is safe, in one round trip, and reports
// whether it did. Only token-bucket, gcra and fixed-window give anything
// back.
func (s *Store) Give(ctx context.Context, p sluice.Policy, key string, stamp model.State, units int64) (bool, error) {
	if s.closed.Load() {
		return false, fmt.Errorf("redisstore: give %q: %w", key, errClosed)
	}
	c, err := s.compile(p)
	if err != nil {
		return false, fmt.Errorf("redisstore: give %q: %w", key, err)
	}
	var args []string
	switch {
	case c.kind == "b" && p.Algorithm != sluice.LeakyBucket:
		next, ok := c.model.Give(stamp, stamp, units)
		if !ok {
			return false, nil
		}
		args = []string{"b", strconv.FormatInt(stamp.Time, 10), strconv.FormatInt(stamp.Frac, 10), c.denS,
			strconv.FormatInt(next.Time, 10), strconv.FormatInt(next.Frac, 10)}
	case c.kind == "f" && units > 0:
		args = []string{"f", strconv.FormatInt(stamp.Time, 10), strconv.FormatInt(units, 10)}
	default:
		return false, nil
	}
	state, _ := stateKey(s.prefix, s.slot, c.tag, key)
	cn, err := s.connection(ctx)
	if err != nil {
		return false, fmt.Errorf("redisstore: give %q: %w", key, err)
	}
	done, err := callV(s, ctx, func(ctx context.Context) (int64, error) {
		return giveScript.Exec(ctx, cn.client, []string{state}, args).AsInt64()
	})
	if err != nil {
		return false, fmt.Errorf("redisstore: give %q: %w", key, err)
	}
	return done == 1, nil
}
