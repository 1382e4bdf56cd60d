// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Share is one member's record in a division of a budget (sluice serve's
// RLQS divides a rule's limit among Envoy streams this way): the demand it
// reported and the grant it holds.
type Share struct {
	Member string
	Demand float64
	Grant  int64
}

// ShareClaim asks a division for a grant for one member.
type ShareClaim struct {
	Member string
	Demand float64
	Want   int64
}

// sharesSource keeps a division in the hash KEYS[1]: member → "demand grant
// expires" (expires in ms of the callers' clock). Every call first drops the
// expired records. ARGV[1] is the operation, ARGV[2] now (ms):
//   - r: returns member, demand, grant of each live record.
//   - d: drops the record of ARGV[3] if it expires no later than ARGV[4].
//   - c: claims, in order, for ARGV[6..] (member, demand, want triples,
//     ARGV[5] of them), each getting min(want, budget ARGV[3] less the other
//     records' grants), at least 0, living ARGV[4] ms; the hash lives that
//     plus the store's slack ARGV[#ARGV]. Returns the grants.
const sharesSource = `
local now = tonumber(ARGV[2])
local all = redis.call('HGETALL', KEYS[1])
local grant, live, total = {}, {}, 0
for i = 1, #all, 2 do
  local d, g, e = string.match(all[i + 1], '^(%S+) (%S+) (%S+)$')
  if tonumber(e) <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    grant[all[i]] = tonumber(g)
    total = total + tonumber(g)
    live[#live + 1] = all[i]
    live[#live + 1] = d
    live[#live + 1] = g
  end
end
local op = ARGV[1]
if op == 'r' then
  return live
elseif op == 'd' then
  local v = redis.call('HGET', KEYS[1], ARGV[3])
  if not v or tonumber(string.match(v, '(%S+)$')) > tonumber(ARGV[4]) then return 0 end
  return redis.call('HDEL', KEYS[1], ARGV[3])
end
local budget, ttl, n = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local out = {}
for i = 0, n - 1 do
  local m, d, w = ARGV[6 + 3 * i], ARGV[7 + 3 * i], tonumber(ARGV[8 + 3 * i])
  local others = total - (grant[m] or 0)
  local g = math.max(math.min(w, budget - others), 0)
  grant[m] = g
  total = others + g
  redis.call('HSET', KEYS[1], m, d .. ' ' .. string.format('%d', g) .. ' ' .. string.format('%d', now + ttl))
  out[i + 1] = g
end
redis.call('PEXPIRE', KEYS[1], ttl + tonumber(ARGV[#ARGV]))
return out
`

var sharesScript = rueidis.NewLuaScript(sharesSource)

// sharesKey is the hash of division name: prefix{q:name}, or
// prefix{slot}q:name with WithSingleSlot.
func sharesKey(prefix, slot, name string) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('{')
	if slot != "" {
		b.WriteString(slot)
		b.WriteByte('}')
	}
	b.WriteString("q:")
	_, hashed := escapedLen(name)
	writeEscaped(&b, name, hashed)
	if slot == "" {
		b.WriteByte('}')
	}
	return b.String()
}

// Shares returns the live records of the division name at now (the
// callers' clock: every replica that shares a division must read clocks
// that agree to well within the records' TTL).
func (s *Store) Shares(ctx context.Context, name string, now time.Time) ([]Share, error) {
	reply, err := s.shares(ctx, name, []string{"r", ms(now)})
	if err != nil {
		return nil, fmt.Errorf("redisstore: shares %q: %w", name, err)
	}
	arr, err := reply.ToArray()
	if err != nil || len(arr)%3 != 0 {
		return nil, fmt.Errorf("redisstore: shares %q: unexpected reply %v (%v)", name, reply, err)
	}
	out := make([]Share, 0, len(arr)/3)
	for i := 0; i < len(arr); i += 3 {
		var sh Share
		var d, g string
		sh.Member, _ = arr[i].ToString()
		d, _ = arr[i+1].ToString()
		g, _ = arr[i+2].ToString()
		if sh.Demand, err = strconv.ParseFloat(d, 64); err == nil {
			sh.Grant, err = strconv.ParseInt(g, 10, 64)
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: shares %q: member %q: malformed record %q %q", name, sh.Member, d, g)
		}
		out = append(out, sh)
	}
	return out, nil
}

// ClaimShares makes claims on the division name in order, atomically: each
// gets what it wants, but no more than budget less the other live records'
// grants (so the grants never sum to more than budget), and lives for ttl
// from now. It returns the grant of each claim.
func (s *Store) ClaimShares(ctx context.Context, name string, budget int64, now time.Time, ttl time.Duration, claims []ShareClaim) ([]int64, error) {
	args := make([]string, 0, 6+3*len(claims))
	args = append(args, "c", ms(now), strconv.FormatInt(budget, 10), strconv.FormatInt(ttl.Milliseconds(), 10), strconv.Itoa(len(claims)))
	for _, c := range claims {
		args = append(args, c.Member, strconv.FormatFloat(c.Demand, 'g', -1, 64), strconv.FormatInt(c.Want, 10))
	}
	args = append(args, s.ttlArg)
	reply, err := s.shares(ctx, name, args)
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim shares %q: %w", name, err)
	}
	arr, err := reply.AsIntSlice()
	if err != nil || len(arr) != len(claims) {
		return nil, fmt.Errorf("redisstore: claim shares %q: unexpected reply %v (%v)", name, reply, err)
	}
	return arr, nil
}

// DropShare removes member's record from the division name at once, if it
// expires no later than before (a record claimed since is kept).
func (s *Store) DropShare(ctx context.Context, name, member string, before time.Time) error {
	if _, err := s.shares(ctx, name, []string{"d", "0", member, ms(before)}); err != nil {
		return fmt.Errorf("redisstore: drop share %q: %w", name, err)
	}
	return nil
}

func (s *Store) shares(ctx context.Context, name string, args []string) (rueidis.RedisMessage, error) {
	var reply rueidis.RedisMessage
	if s.closed.Load() {
		return reply, errClosed
	}
	cn, err := s.connection(ctx)
	if err != nil {
		return reply, err
	}
	return callV(s, ctx, func(ctx context.Context) (rueidis.RedisMessage, error) {
		return sharesScript.Exec(ctx, cn.client, []string{sharesKey(s.prefix, s.slot, name)}, args).ToMessage()
	})
}

// ms is t in Unix milliseconds.
func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
