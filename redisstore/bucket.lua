-- sluice redisstore: one token-bucket, gcra or leaky-bucket decision, a
-- function of singles.lua (fast.go sends it only within the exact range:
-- the burst's duration and the fraction's denominator below 2^52). The
-- state is the theoretical arrival time TAT = t + f/d nanoseconds; with
-- emission interval T, a request of cost c at now is admitted iff
-- max(TAT, now) + c*T - now <= Burst*T, and then TAT = max(TAT, now) + c*T.
-- Everything is worked out relative to now, as the debt TAT - now in whole
-- ns and a fraction, which stays below 2^53, so every number is an exact
-- double. The absolute times are split into seconds and nanoseconds.
-- key: the state hash; ns, nl: now in seconds and nanoseconds; a: the
-- request's arguments from ARGV[i+1]: dur(cost) ns and fraction (dur(1)
-- for a peek, which is judged as cost 1), dur(burst) ns and fraction,
-- denominator, cost ('0' or '1'); slack: ms added to the expiry. Returns
-- admitted (1/0), t and f as stored, or '?' when the state is outside this
-- range (take.lua decides then; nothing is written).
local function bucket(key, ns, nl, i, slack)
  local dens = ARGV[i + 5]
  local den = tonumber(dens)
  local v = redis.call('HMGET', key, 't', 'f', 'd')
  local ts, fs = v[1] or '0', v[2] or '0'
  local f = tonumber(fs)
  if f > 0 and v[3] ~= dens then return '?', '', '' end -- another denominator
  local m = #ts
  local th, tl = 0, tonumber(ts)
  if m > 9 then th, tl = tonumber(string.sub(ts, 1, m - 9)), tonumber(string.sub(ts, m - 8)) end
  -- The debt d + df/den: TAT - now if the TAT is later, else 0.
  local d, df = 0, 0
  if th >= ns then
    if th - ns > 4000000 then return '?', '', '' end -- more than 2^52 ns ahead
    d = (th - ns) * 1000000000 + tl - nl
    if d < 0 then d = 0 else df = f end
  end
  local xd, xf = d + tonumber(ARGV[i + 1]), df + tonumber(ARGV[i + 2])
  if xf >= den then xd, xf = xd + 1, xf - den end
  local bd, bf = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local ok = xd < bd or (xd == bd and xf <= bf)
  if ok and ARGV[i + 6] ~= '0' then
    -- The new TAT, now + xd, as seconds and nanoseconds.
    local s = nl + xd
    local q = math.floor(s / 1000000000)
    local r = s - q * 1000000000
    if r < 0 then q, r = q - 1, r + 1000000000 elseif r >= 1000000000 then q, r = q + 1, r - 1000000000 end
    q = ns + q
    local tats = q == 0 and string.format('%d', r) or string.format('%d%09d', q, r)
    if xf == 0 and f == 0 and v[3] == dens then
      redis.call('HSET', key, 't', tats, 'x', tats) -- f and d stay
    else
      local xs = tats -- the expiry: the TAT rounded up to a whole ns
      if xf > 0 then
        local xr, xq = r + 1, q
        if xr == 1000000000 then xq, xr = xq + 1, 0 end
        xs = xq == 0 and string.format('%d', xr) or string.format('%d%09d', xq, xr)
      end
      redis.call('HSET', key, 't', tats, 'f', string.format('%d', xf), 'd', dens, 'x', xs)
    end
    local ms = math.ceil((xd + (xf > 0 and 1 or 0)) / 1000000)
    redis.call('PEXPIRE', key, math.max(ms, 1) + slack)
  end
  return ok and 1 or 0, ts, fs
end
