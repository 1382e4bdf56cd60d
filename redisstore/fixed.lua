-- sluice redisstore: one fixed-window decision, a function of singles.lua
-- (fast.go sends it only within the exact range: Period a whole number of
-- microseconds, Limit below 2^53). Counts admitted in (window start,
-- count); the window is aligned to multiples of Period since the epoch.
-- Times are whole microseconds, below 2^53 until the year 2255, so every
-- number is an exact double; the hash keeps take.lua's layout (t and x in
-- nanoseconds), so both read it.
-- key: the state hash; now: µs; cost, limit, period (µs): strings; slack:
-- ms added to the expiry. Returns admitted (1/0), t and c as stored ('' if
-- absent), or '?' when the state was written under another period
-- (take.lua decides then; nothing is written).
local function fixed(key, now, cost, limit, period, slack)
  local p = tonumber(period)
  local v = redis.call('HMGET', key, 't', 'c')
  local ws, n = now - math.fmod(now, p), 0 -- fmod is exact
  if v[1] then
    local t = v[1]
    if t == '0' then t = 0
    elseif string.sub(t, -3) == '000' then t = tonumber(string.sub(t, 1, -4))
    else return '?', '', '' end
    if t == ws or (t > ws and math.fmod(t, p) == 0) then
      ws, n = t, tonumber(v[2]) -- this window, or a later one (a clock that stepped back)
    elseif t > ws then
      ws = t - math.fmod(t, p)
    end
  end
  -- Admitted iff cost <= limit - n; a peek (cost 0) is judged as cost 1.
  local c = tonumber(cost)
  local ok = math.max(c, 1) <= tonumber(limit) - n
  if ok and c > 0 then
    if n > 0 then -- the window's state and expiry are written already
      redis.call('HINCRBY', key, 'c', cost)
    else -- the window's first admission: the key expires with it
      local x = ws + p
      redis.call('HSET', key, 't', ws == 0 and '0' or string.format('%d000', ws),
        'c', cost, 'x', string.format('%d000', x))
      redis.call('PEXPIRE', key, math.ceil((x - now) / 1000) + slack)
    end
  end
  return ok and 1 or 0, v[1] or '', v[2] or ''
end
