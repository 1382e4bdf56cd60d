-- sluice redisstore: fixed-window decisions, functions of singles.lua
-- (fast.go sends them only within the exact range: Period a whole number of
-- microseconds, Limit below 2^52). The window is aligned to multiples of
-- Period since the epoch. The state hash holds one field per window, named
-- "start:end" (nanoseconds), whose value is the count admitted in it;
-- take_fixed.lua keeps the same. Times are whole microseconds, below 2^53
-- until the year 2255, so every number is an exact double.
--
-- A request is one HINCRBY of its window's field: admitted if the count
-- after it is within the limit, else taken back (the script is atomic, so
-- nobody sees it). The window's first admission on a new key adds a
-- PEXPIRE ... NX to the window's end (on Redis before 7.0, an HLEN and a
-- PEXPIRE); on a key that exists, the other windows' fields are read
-- (fixed_rest).

-- fixed_group: what a group's requests share (one now, one policy, one
-- cost): ns, nl: now in seconds and nanoseconds; cost, limit, period (µs):
-- strings; slack: ms added to the expiry.
local function fixed_group(ns, nl, cost, limit, period, slack)
  local now, p = ns * 1000000 + math.floor(nl / 1000), tonumber(period)
  local ws = now - math.fmod(now, p) -- fmod is exact
  return {ws = ws, c = tonumber(cost), cs = cost, k = tonumber(limit),
    f = (ws == 0 and '0' or string.format('%d000', ws)) .. string.format(':%d000', ws + p),
    ttl = string.format('%d', math.ceil((ws + p - now) / 1000) + slack)}
end

-- fixed_rest finishes a request whose window had no count on a key that
-- exists: other windows' fields are there. r is the count after the
-- request's HINCRBY, or nil for a peek or an impossible cost (nothing
-- written). Earlier windows are over: deleted, and the key expires with
-- this one. A later window (a clock that stepped back) or a field of
-- another shape: the HINCRBY is taken back and take.lua decides (-1).
local function fixed_rest(key, g, r)
  local v = redis.call('HKEYS', key)
  local old = {}
  for i = 1, #v do
    local f = v[i]
    if f ~= g.f then
      local e = string.match(f, '^%d+:(%d+)000$')
      if not e or tonumber(e) > g.ws then
        if r then redis.call('HDEL', key, g.f) end
        return -1
      end
      old[#old + 1] = f
    end
  end
  if not r then return (g.c == 0 and g.k >= 1) and 1 or 0 end
  if #old > 0 then redis.call('HDEL', key, unpack(old)) end
  redis.call('PEXPIRE', key, g.ttl)
  return 1
end

-- fixed decides one request of group g on key. Admitted iff cost <= limit -
-- n, n the window's count; a peek (cost 0) is judged as cost 1. Returns
-- 2n+1 if admitted, 2n if not, or -1 when take.lua is to decide (nothing
-- written): the state is not this layout's, or the count is 2^52 or more.
local function fixed(key, g)
  local c, k = g.c, g.k
  if c > 0 and c <= k then
    local r = redis.pcall('HINCRBY', key, g.f, g.cs)
    if type(r) ~= 'number' then return -1 end -- not a count, or past int64
    local n = r - c
    if n > 0 then
      if r <= k then return 2 * n + 1 end
      redis.call('HINCRBY', key, g.f, -c) -- refused: taken back
      if n >= 4503599627370496 then return -1 end -- 2^52: Lua's n may not be exact
      return 2 * n
    end
    -- A new key has no expiry yet. (Redis before 7.0 has no NX: there a
    -- key with this field alone is given its expiry.)
    local x = redis.pcall('PEXPIRE', key, g.ttl, 'NX')
    if x == 1 then return 1 end
    if type(x) == 'table' and redis.call('HLEN', key) == 1 then
      redis.call('PEXPIRE', key, g.ttl)
      return 1
    end
    return fixed_rest(key, g, r)
  end
  -- A peek, or a cost past the limit: read only.
  local v = redis.call('HGET', key, g.f)
  if not v then return fixed_rest(key, g, nil) end
  local n = tonumber(v)
  if n >= 4503599627370496 then return -1 end
  if c == 0 and n < k then return 2 * n + 1 end
  return 2 * n
end
