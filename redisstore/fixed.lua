-- sluice redisstore: one fixed-window decision (fast.go sends it only
-- within the exact range: Period a whole number of microseconds, Limit below
-- 2^53). Counts admitted in (window start, count); the window is aligned to
-- multiples of Period since the epoch. Times are whole microseconds, below
-- 2^53 until the year 2255, so every number is an exact double; the hash
-- keeps take.lua's layout (t and x in nanoseconds), so both read it.
-- KEYS[1]: the state hash.
-- ARGV: now in µs ("" for Redis TIME), cost, limit, period µs, slack ms.
-- Returns {now µs, admitted 1/0, t, c as stored}, or {"?"} when the state
-- was written under another period (take.lua decides then).
local now = ARGV[1]
if now == "" then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(now)
end
local cost, limit, p = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local key = KEYS[1]
local v = redis.call('HMGET', key, 't', 'c')
local ws, n = now - math.fmod(now, p), 0 -- fmod is exact
if v[1] then
  local t = v[1]
  if t == '0' then t = 0
  elseif string.sub(t, -3) == '000' then t = tonumber(string.sub(t, 1, -4))
  else return {'?'} end
  if t == ws or (t > ws and math.fmod(t, p) == 0) then
    ws, n = t, tonumber(v[2]) -- this window, or a later one (a clock that stepped back)
  elseif t > ws then
    ws = t - math.fmod(t, p)
  end
end
-- Admitted iff cost <= limit - n; a peek (cost 0) is judged as cost 1.
local ok = math.max(cost, 1) <= limit - n
if ok and cost > 0 then
  if n > 0 then -- the window's state and expiry are written already
    redis.call('HINCRBY', key, 'c', ARGV[2])
  else -- the window's first admission: the key expires with it
    local x = ws + p
    redis.call('HSET', key, 't', ws == 0 and '0' or string.format('%d000', ws),
      'c', ARGV[2], 'x', string.format('%d000', x))
    redis.call('PEXPIRE', key, math.ceil((x - now) / 1000) + tonumber(ARGV[5]))
  end
end
return {now, ok and 1 or 0, v[1] or '', v[2] or ''}
