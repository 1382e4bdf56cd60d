-- sluice redisstore: give back units of a lease (see sluice.Model.Give).
--
-- KEYS[1]: the state hash.
-- Bucket kinds, ARGV: "b", the stamp's TAT and fraction, the denominator,
--   then the TAT, fraction and expiry to write: only if the key still holds
--   exactly the stamp (nothing else changed it since the lease's take).
-- Fixed window, ARGV: "f", the stamp's window start, units: the count (the
--   field "start:end" of that window) goes down by units if the key still
--   has that window and it holds at least units (counts beyond 15 digits,
--   which doubles may not hold exactly, are left alone).
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
-- The window's count: the field "start:end" whose start is the stamp's.
local v = redis.call('HKEYS', key)
for i = 1, #v do
  if string.match(v[i], '^(%d+):') == ARGV[2] then
    local c = redis.call('HGET', key, v[i])
    if #c > 15 then return 0 end
    if tonumber(c) < tonumber(ARGV[3]) then return 0 end
    redis.call('HINCRBY', key, v[i], -tonumber(ARGV[3]))
    return 1
  end
end
return 0
