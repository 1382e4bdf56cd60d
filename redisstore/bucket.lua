-- sluice redisstore: token-bucket, gcra and leaky-bucket decisions,
-- functions of singles.lua (fast.go sends them only within the exact range:
-- the burst's duration and the fraction's denominator below 2^52). The
-- state is the theoretical arrival time TAT = t + f/d nanoseconds; with
-- emission interval T, a request of cost c at now is admitted iff
-- max(TAT, now) + c*T - now <= Burst*T, and then TAT = max(TAT, now) + c*T.
-- Everything is worked out relative to now, as the debt TAT - now in whole
-- ns and a fraction, which stays below 2^52, so every number is an exact
-- double. The absolute times are split into seconds and nanoseconds.
--
-- Expiry: the key must outlive its TAT. Field e, "E:t", says that the key
-- lives until E (ms since the epoch, by the clock of the decisions) at
-- least, as long as t is the TAT stored (every other writer changes t or
-- clears e). An admission whose TAT is within E leaves the expiry alone;
-- one past it sets the expiry to the TAT plus the burst's duration, so a
-- key busy enough to come back within that needs no PEXPIRE, and no key
-- lives more than twice its longest state (plus the slack).

-- bucket_group: what a group's requests share, from ARGV[i]: dur(cost) ns
-- and fraction (dur(1) for a peek, which is judged as cost 1), dur(burst)
-- ns and fraction, denominator, write ('0' for a peek), dur(burst) in
-- whole ms (rounded up); slack: ms added to the expiry.
local function bucket_group(i, slack)
  return {cn = tonumber(ARGV[i]), cf = tonumber(ARGV[i + 1]),
    bn = tonumber(ARGV[i + 2]), bf = tonumber(ARGV[i + 3]),
    dens = ARGV[i + 4], den = tonumber(ARGV[i + 4]),
    write = ARGV[i + 5] ~= '0', room = tonumber(ARGV[i + 6]), slack = slack}
end

-- bucket decides one request of group g on key at now (ns seconds, nl
-- nanoseconds). Returns, for the debt d + df/den it read: 2d+1 if admitted
-- and 2d if not when df is 0, else the string "d a df" (a: 1 or 0); or -1
-- when the state is outside this range (take.lua decides then; nothing is
-- written).
local function bucket(key, ns, nl, g)
  local v = redis.call('HMGET', key, 't', 'f', 'd', 'e')
  local ts, f = v[1] or '0', tonumber(v[2] or '0')
  if f > 0 and v[3] ~= g.dens then return -1 end -- another denominator
  local m = #ts
  local th, tl = 0, tonumber(ts)
  if m > 9 then th, tl = tonumber(string.sub(ts, 1, m - 9)), tonumber(string.sub(ts, m - 8)) end
  -- The debt d + df/den: TAT - now if the TAT is later, else 0.
  local d, df = 0, 0
  if th >= ns then
    if th - ns > 4000000 then return -1 end -- more than 2^52 ns ahead
    d = (th - ns) * 1000000000 + tl - nl
    if d < 0 then d = 0 elseif d >= 4503599627370496 then return -1 else df = f end
  end
  local xd, xf = d + g.cn, df + g.cf
  if xf >= g.den then xd, xf = xd + 1, xf - g.den end
  local ok = xd < g.bn or (xd == g.bn and xf <= g.bf)
  if ok and g.write then
    -- The new TAT, now + xd, as seconds and nanoseconds.
    local s = nl + xd
    local q = math.floor(s / 1000000000)
    local r = s - q * 1000000000
    if r < 0 then q, r = q - 1, r + 1000000000 elseif r >= 1000000000 then q, r = q + 1, r - 1000000000 end
    q = ns + q
    local tats = q == 0 and string.format('%d', r) or string.format('%d%09d', q, r)
    local xs = tats -- the state's expiry: the TAT rounded up to a whole ns
    if xf > 0 then
      local xr, xq = r + 1, q
      if xr == 1000000000 then xq, xr = xq + 1, 0 end
      xs = xq == 0 and string.format('%d', xr) or string.format('%d%09d', xq, xr)
    end
    -- The key's expiry, E, covers the new TAT, or is moved past it.
    local ttl = math.ceil((xd + (xf > 0 and 1 or 0)) / 1000000) -- ms from now
    local nms = ns * 1000 + math.floor(nl / 1000000)
    local e, E = v[4], nil
    if e then
      local c = string.find(e, ':', 1, true)
      if c and string.sub(e, c + 1) == v[1] then E = tonumber(string.sub(e, 1, c - 1)) end
    end
    local extend = not E or nms + ttl > E
    if extend then
      ttl = math.max(ttl, 1) + g.room
      E = nms + ttl
    end
    local es = string.format('%d:%s', E, tats)
    if xf == 0 and f == 0 and v[3] == g.dens then
      redis.call('HSET', key, 't', tats, 'x', tats, 'e', es) -- f and d stay
    else
      redis.call('HSET', key, 't', tats, 'f', string.format('%d', xf), 'd', g.dens, 'x', xs, 'e', es)
    end
    if extend then redis.call('PEXPIRE', key, ttl + g.slack) end
  end
  if df == 0 then return ok and 2 * d + 1 or 2 * d end
  return string.format('%d %d %d', d, ok and 1 or 0, df)
end
