-- sluice redisstore: fixed-window decisions, functions of singles.lua
-- (fast.go sends them only within the exact range: Period a whole number of
-- microseconds, Limit below 2^52). Counts admitted in (window start t,
-- count c); the window is aligned to multiples of Period since the epoch.
-- Times are whole microseconds, below 2^53 until the year 2255, so every
-- number is an exact double; the hash keeps take.lua's layout (t and x in
-- nanoseconds), so both read it.

-- fixed_group: what a group's requests share (one now, one policy, one
-- cost): ns, nl: now in seconds and nanoseconds; cost, limit, period (µs):
-- strings; slack: ms added to the expiry.
local function fixed_group(ns, nl, cost, limit, period, slack)
  local now, p = ns * 1000000 + math.floor(nl / 1000), tonumber(period)
  local ws = now - math.fmod(now, p) -- fmod is exact
  return {ws = ws, c = tonumber(cost), cs = cost, k = tonumber(limit),
    t = ws == 0 and '0' or string.format('%d000', ws),
    x = string.format('%d000', ws + p),
    ttl = math.ceil((ws + p - now) / 1000) + slack}
end

-- fixed decides one request of group g on key. Admitted iff cost <= limit -
-- n, n the count of the current window (0 if the state is of an earlier
-- one); a peek (cost 0) is judged as cost 1. Returns 2n+1 if admitted, 2n
-- if not, or -1 when the state was written in another unit, for a later
-- window (a clock that stepped back) or holds 2^52 or more (take.lua
-- decides then; nothing is written).
local function fixed(key, g)
  local v = redis.call('HMGET', key, 't', 'c')
  local t, n = v[1], 0
  if t then
    if t ~= g.t then
      if t == '0' then t = 0
      elseif string.sub(t, -3) == '000' then t = tonumber(string.sub(t, 1, -4))
      else return -1 end
      if t > g.ws then return -1 end
    end
    if t == g.t or t == g.ws then
      n = tonumber(v[2] or '0')
      if n >= 4503599627370496 then return -1 end
    end
  end
  if math.max(g.c, 1) > g.k - n then return 2 * n end
  if g.c > 0 then
    if n > 0 then -- the window's state and expiry are written already
      redis.call('HINCRBY', key, 'c', g.cs)
    else -- the window's first admission: the key expires with it
      redis.call('HSET', key, 't', g.t, 'c', g.cs, 'x', g.x)
      redis.call('PEXPIRE', key, g.ttl)
    end
  end
  return 2 * n + 1
end
