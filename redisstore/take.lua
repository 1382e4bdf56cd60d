-- sluice redisstore: the atomic part of a batch of rate-limiting decisions.
--
-- The Go models are the oracle. This script only reads each key's state,
-- evaluates the admission predicate of its algorithm exactly, and, when
-- every request of the batch is admitted, writes the new states and sets
-- each key's expiry; otherwise it writes nothing. It returns the instant it
-- used and, per request, the state that request saw, from which the Go side
-- computes the full decision with the model.
--
-- Lua numbers are doubles, exact only up to 2^53, while the models use
-- 63-bit nanoseconds and 126-bit products. So every number here is a
-- non-negative integer held as little-endian limbs of 24 bits ({} is 0),
-- read from and written as decimal strings.
--
-- KEYS: two per request: the state hash, and the sliding-log list.
-- ARGV[1]: now in nanoseconds, or "" to read Redis TIME.
-- ARGV[2]: milliseconds added to every TTL (0 when the time is Redis TIME).
-- ARGV[3]: the number of requests; then 9 fields per request:
--   kind ("b" bucket, "f" fixed window, "w" sliding window, "l" sliding log),
--   cost, capacity (burst or limit), period, dur(cost) ns, dur(cost) frac,
--   dur(burst) ns, dur(burst) frac, denominator.
-- Returns {now, committed (1/0), then 4 strings per request}.

local BASE = 16777216

local function norm(a)
  local n = #a
  while n > 0 and a[n] == 0 do a[n] = nil; n = n - 1 end
  return a
end

local function big(s)
  local a = {}
  local i = 1
  local len = #s
  while i <= len do
    local j = math.min(i + 5, len)
    local carry = tonumber(string.sub(s, i, j))
    local mulby = 10 ^ (j - i + 1)
    for k = 1, #a do
      local v = a[k] * mulby + carry
      carry = math.floor(v / BASE)
      a[k] = v - carry * BASE
    end
    while carry > 0 do
      local q = math.floor(carry / BASE)
      a[#a + 1] = carry - q * BASE
      carry = q
    end
    i = j + 1
  end
  return norm(a)
end

local function str(a)
  if #a == 0 then return "0" end
  local x = {}
  for i = 1, #a do x[i] = a[i] end
  local parts = {}
  while #x > 0 do
    local r = 0
    for j = #x, 1, -1 do
      local v = r * BASE + x[j]
      local q = math.floor(v / 1000000)
      r = v - q * 1000000
      x[j] = q
    end
    norm(x)
    parts[#parts + 1] = r
  end
  local s = string.format("%d", parts[#parts])
  for i = #parts - 1, 1, -1 do s = s .. string.format("%06d", parts[i]) end
  return s
end

local function cmp(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
  end
  return 0
end

local function add(a, b)
  local r, carry = {}, 0
  for i = 1, math.max(#a, #b) do
    local v = (a[i] or 0) + (b[i] or 0) + carry
    if v >= BASE then r[i] = v - BASE; carry = 1 else r[i] = v; carry = 0 end
  end
  if carry > 0 then r[#r + 1] = carry end
  return r
end

-- sub returns a - b for a >= b.
local function sub(a, b)
  local r, borrow = {}, 0
  for i = 1, #a do
    local v = a[i] - (b[i] or 0) - borrow
    if v < 0 then r[i] = v + BASE; borrow = 1 else r[i] = v; borrow = 0 end
  end
  return norm(r)
end

local function mul(a, b)
  local r = {}
  for i = 1, #a + #b do r[i] = 0 end
  for i = 1, #a do
    local carry = 0
    for j = 1, #b do
      local v = r[i + j - 1] + a[i] * b[j] + carry
      carry = math.floor(v / BASE)
      r[i + j - 1] = v - carry * BASE
    end
    local k = i + #b
    while carry > 0 do
      local v = r[k] + carry
      carry = math.floor(v / BASE)
      r[k] = v - carry * BASE
      k = k + 1
    end
  end
  return norm(r)
end

-- mod returns a mod p for p > 0, by binary long division.
local function mod(a, p)
  if cmp(a, p) < 0 then return a end
  local r = {}
  for i = #a, 1, -1 do
    local limb = a[i]
    for bit = 23, 0, -1 do
      r = add(r, r)
      local pow = 2 ^ bit
      if limb >= pow then
        limb = limb - pow
        r = add(r, {1})
      end
      if cmp(r, p) >= 0 then r = sub(r, p) end
    end
  end
  return r
end

-- ceilms returns ceil(a / 10^6) as a decimal string.
local function ceilms(a)
  local q, r = {}, 0
  for j = #a, 1, -1 do
    local v = r * BASE + a[j]
    q[j] = math.floor(v / 1000000)
    r = v - q[j] * 1000000
  end
  norm(q)
  if r > 0 then q = add(q, {1}) end
  return str(q)
end

local function max(a, b)
  if cmp(a, b) >= 0 then return a end
  return b
end

local ZERO, ONE = {}, {1}

-- Instants with a fraction: ns + frac/den.
local function radd(ans, af, bns, bf, den)
  local ns, f = add(ans, bns), add(af, bf)
  if cmp(f, den) >= 0 then f = sub(f, den); ns = add(ns, ONE) end
  return ns, f
end

local function rless(ans, af, bns, bf)
  local c = cmp(ans, bns)
  return c < 0 or (c == 0 and cmp(af, bf) < 0)
end

local now
if ARGV[1] == "" then
  local t = redis.call('TIME')
  now = add(mul(big(t[1]), big("1000000000")), mul(big(t[2]), big("1000")))
else
  now = big(ARGV[1])
end
local slack = big(ARGV[2])
local n = tonumber(ARGV[3])

local states, order = {}, {}
local out = {str(now), "0"}
local all = true

local function entry(e)
  local sp = string.find(e, " ", 1, true)
  return big(string.sub(e, 1, sp - 1)), big(string.sub(e, sp + 1))
end

-- logentry returns the i-th (0-based) entry of a sliding-log state,
-- counting the stored list and then the pending appends.
local function logentry(s, i)
  if i < s.len then
    return entry(redis.call('LINDEX', s.lkey, i))
  end
  local p = s.pending[i - s.len + 1]
  return p[1], p[2]
end

local function load(kind, key, lkey, den)
  local s = {kind = kind, key = key, lkey = lkey}
  if kind == "b" then
    local v = redis.call('HMGET', key, 't', 'f', 'd')
    s.t, s.f = big(v[1] or "0"), big(v[2] or "0")
    if v[3] and v[3] ~= den then
      -- Stored by a policy of the same name with another emission
      -- interval: round the TAT up to a whole nanosecond.
      if #s.f > 0 then s.t = add(s.t, ONE) end
      s.f = ZERO
    end
    s.d = den
  elseif kind == "f" or kind == "w" then
    local v = redis.call('HMGET', key, 't', 'c', 'p')
    s.t, s.c, s.p = big(v[1] or "0"), big(v[2] or "0"), big(v[3] or "0")
  else
    local v = redis.call('HMGET', key, 'u', 'a')
    s.u, s.a = big(v[1] or "0"), big(v[2] or "0")
    s.len = redis.call('LLEN', lkey)
    s.trim = 0
    s.pending = {}
    if s.len == 0 then s.u = ZERO end
  end
  return s
end

for i = 1, n do
  local base = 3 + (i - 1) * 9
  local kind = ARGV[base + 1]
  local cost = big(ARGV[base + 2])
  local cap = big(ARGV[base + 3])
  local period = big(ARGV[base + 4])
  local key, lkey = KEYS[2 * i - 1], KEYS[2 * i]
  local s = states[key]
  if not s then
    s = load(kind, key, lkey, ARGV[base + 9])
    states[key] = s
    order[#order + 1] = key
  end
  local ok = false
  local o1, o2, o3, o4 = "", "", "", ""
  if kind == "b" then
    local den = big(ARGV[base + 9])
    o1, o2 = str(s.t), str(s.f)
    if cmp(cost, cap) <= 0 then
      local tns, tf = s.t, s.f
      if rless(tns, tf, now, ZERO) then tns, tf = now, ZERO end
      local nns, nf = radd(tns, tf, big(ARGV[base + 5]), big(ARGV[base + 6]), den)
      local lns, lf = radd(now, ZERO, big(ARGV[base + 7]), big(ARGV[base + 8]), den)
      if not rless(lns, lf, nns, nf) then
        ok = true
        if #cost > 0 then
          s.t, s.f, s.d = nns, nf, ARGV[base + 9]
          s.x = #nf > 0 and add(nns, ONE) or nns
          s.dirty = true
        end
      end
    end
  elseif kind == "f" then
    o1, o2 = str(s.t), str(s.c)
    local t = max(now, s.t)
    local start = sub(t, mod(t, period))
    local count = ZERO
    if cmp(s.t, start) == 0 then count = s.c end
    if cmp(cost, cap) <= 0 and cmp(add(count, cost), cap) <= 0 then
      ok = true
      if #cost > 0 then
        s.t, s.c = start, add(count, cost)
        s.x = add(start, period)
        s.dirty = true
      end
    end
  elseif kind == "w" then
    o1, o2, o3 = str(s.t), str(s.c), str(s.p)
    local t = max(now, s.t)
    local start = sub(t, mod(t, period))
    local cur, prev = ZERO, ZERO
    if cmp(s.t, start) == 0 then
      cur, prev = s.c, s.p
    elseif cmp(start, period) >= 0 and cmp(s.t, sub(start, period)) == 0 then
      prev = s.c
    end
    if cmp(cost, cap) <= 0 then
      if #cost == 0 then
        ok = true
      elseif cmp(add(cur, cost), cap) <= 0 then
        -- (limit - cur - cost) * P >= prev * (P - e), e = t - start
        local room = sub(cap, add(cur, cost))
        ok = cmp(mul(room, period), mul(prev, sub(period, sub(t, start)))) >= 0
      end
      if ok and #cost > 0 then
        s.t, s.c, s.p = start, add(cur, cost), prev
        s.x = add(start, add(period, period))
        s.dirty = true
      end
    end
  else
    -- Drop (tentatively) the entries that have left: At + P <= now.
    while s.trim < s.len + #s.pending do
      local at, c = logentry(s, s.trim)
      if cmp(add(at, period), now) > 0 then break end
      s.trim = s.trim + 1
      s.u = sub(s.u, c)
    end
    o1, o2 = str(s.u), str(s.a)
    if cmp(cost, cap) <= 0 then
      if cmp(add(s.u, cost), cap) <= 0 then
        ok = true
        if #cost > 0 then
          local at = now
          if #s.u > 0 then at = max(at, s.a) end
          s.pending[#s.pending + 1] = {at, cost}
          s.u = add(s.u, cost)
          s.a = at
          s.x = add(at, period)
          s.dirty = true
        end
      else
        -- The request fits once the oldest entries whose costs add up to
        -- used + cost - limit have left; report the last of them.
        local need = sub(add(s.u, cost), cap)
        local acc = ZERO
        local i = s.trim
        local at, c
        while true do
          at, c = logentry(s, i)
          acc = add(acc, c)
          if cmp(acc, need) >= 0 then break end
          i = i + 1
        end
        o3, o4 = str(at), str(acc)
      end
    end
  end
  if not ok then all = false end
  out[#out + 1] = o1
  out[#out + 1] = o2
  out[#out + 1] = o3
  out[#out + 1] = o4
end

if all then
  for _, key in ipairs(order) do
    local s = states[key]
    if s.dirty then
      local ms = ceilms(sub(s.x, now))
      if ms == "0" then ms = "1" end
      ms = str(add(big(ms), slack))
      local x = str(s.x)
      if s.kind == "b" then
        redis.call('HSET', key, 't', str(s.t), 'f', str(s.f), 'd', s.d, 'x', x)
      elseif s.kind == "f" then
        redis.call('HSET', key, 't', str(s.t), 'c', str(s.c), 'x', x)
      elseif s.kind == "w" then
        redis.call('HSET', key, 't', str(s.t), 'c', str(s.c), 'p', str(s.p), 'x', x)
      else
        if s.trim > 0 then redis.call('LTRIM', s.lkey, math.min(s.trim, s.len), -1) end
        for _, p in ipairs(s.pending) do
          redis.call('RPUSH', s.lkey, str(p[1]) .. " " .. str(p[2]))
        end
        redis.call('HSET', key, 'u', str(s.u), 'a', str(s.a), 'x', x)
        redis.call('PEXPIRE', s.lkey, ms)
      end
      redis.call('PEXPIRE', key, ms)
    end
  end
  out[2] = "1"
end
return out
