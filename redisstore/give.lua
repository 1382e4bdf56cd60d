-- sluice redisstore: give back units of a lease (see sluice.Model.Give).
--
-- KEYS[1]: the state hash.
-- Bucket kinds, ARGV: "b", the stamp's TAT and fraction, the denominator,
--   then the TAT, fraction and expiry to write: only if the key still holds
--   exactly the stamp (nothing else changed it since the lease's take).
-- Fixed window, ARGV: "f", the stamp's window start, units: the count goes
--   down by units if the key is still in that window and holds at least
--   units (counts beyond 15 digits, which doubles may not hold exactly, are
--   left alone).
--   ARGV[8] is now in nanoseconds, or "" to read Redis TIME, and ARGV[9]
--   the milliseconds added to the TTL (take.lua's ARGV[1] and ARGV[2]): the
--   key's TTL moves to the new, earlier expiry, rounded up to a millisecond.
-- Returns 1 if it gave back, else 0. A fixed window's TTL is left as it
-- was (the window's end).
local key = KEYS[1]
if ARGV[1] == "b" then
  local v = redis.call('HMGET', key, 't', 'f', 'd')
  if v[1] ~= ARGV[2] or (v[2] or "0") ~= ARGV[3] or v[3] ~= ARGV[4] then return 0 end
  redis.call('HSET', key, 't', ARGV[5], 'f', ARGV[6], 'x', ARGV[7], 'e', '') -- e: see bucket.lua
  -- Whole milliseconds of a decimal nanosecond count (ns since the epoch
  -- exceed 2^53; their milliseconds do not): rounded up or down.
  local function ms(s, up)
    local m = #s
    if m <= 6 then
      if up and tonumber(s) > 0 then return 1 end
      return 0
    end
    local q = tonumber(string.sub(s, 1, m - 6))
    if up and tonumber(string.sub(s, m - 5)) > 0 then q = q + 1 end
    return q
  end
  local now
  if ARGV[8] == "" then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  else
    now = ms(ARGV[8], false)
  end
  local ttl = ms(ARGV[7], true) - now
  if ttl < 1 then ttl = 1 end
  redis.call('PEXPIRE', key, string.format("%d", ttl + tonumber(ARGV[9])))
  return 1
end
local v = redis.call('HMGET', key, 't', 'c')
if v[1] ~= ARGV[2] or not v[2] or #v[2] > 15 then return 0 end
local c, u = tonumber(v[2]), tonumber(ARGV[3])
if c < u then return 0 end
redis.call('HSET', key, 'c', string.format("%d", c - u))
return 1
