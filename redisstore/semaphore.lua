-- sluice redisstore: one atomic step of an in-flight (concurrency) limit.
--
-- KEYS[1] is a sorted set of holder ids scored by their expiry, in
-- microseconds since the Unix epoch (below 2^53, so exact in doubles). A
-- holder holds a slot while now < expiry. Every call first removes the
-- expired holders, then applies one operation, then sets the key's PEXPIRE
-- to its latest holder's expiry (plus the slack): no key outlives its
-- holders, and an empty sorted set does not exist in Redis.
--
-- ARGV[1]: "a" acquire, "r" release, "e" extend.
-- ARGV[2]: now in microseconds, or "" to read Redis TIME.
-- ARGV[3]: milliseconds added to the PEXPIRE (0 when the time is Redis TIME).
-- ARGV[4]: the holder id.
-- ARGV[5]: the limit (acquire).
-- ARGV[6]: the TTL in microseconds (acquire, extend).
-- Returns {ok (1/0), holders after the call, microseconds until the
-- earliest expiry (0 when none)}.

local key = KEYS[1]
local op, holder = ARGV[1], ARGV[4]
local now
if ARGV[2] == "" then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
end
local slack = tonumber(ARGV[3])

redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
local ok = 0
if op == 'a' then
  local limit, ttl = tonumber(ARGV[5]), tonumber(ARGV[6])
  if redis.call('ZSCORE', key, holder) or redis.call('ZCARD', key) < limit then
    redis.call('ZADD', key, string.format('%d', now + ttl), holder)
    ok = 1
  end
elseif op == 'r' then
  ok = redis.call('ZREM', key, holder)
elseif op == 'e' then
  if redis.call('ZSCORE', key, holder) then
    redis.call('ZADD', key, 'XX', string.format('%d', now + tonumber(ARGV[6])), holder)
    ok = 1
  end
else
  return redis.error_reply('sluice semaphore: unknown operation ' .. op)
end
local n = redis.call('ZCARD', key)
local nxt = 0
if n > 0 then
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  nxt = tonumber(first[2]) - now
  redis.call('PEXPIRE', key, math.ceil((tonumber(last[2]) - now) / 1000) + slack)
end
return {ok, n, nxt}
