-- sluice redisstore: token-bucket, gcra and leaky-bucket decisions,
-- functions of singles.lua (fast.go sends them only within the exact range:
-- see fastKind). The state is the theoretical arrival time TAT; with
-- emission interval T, a request of cost c at now is admitted iff
-- max(TAT, now) + c*T - now <= Burst*T, and then TAT = max(TAT, now) + c*T.
--
-- In Redis the TAT is one field of the hash, "B:d:H", holding v = (TAT - B
-- ms) * d: B is the start of now's epoch (ms since the Unix epoch; epochs
-- last H = floor(dur(Burst) / 1ms) + 1 ms), d the denominator
-- (take_bucket.lua keeps the same). Everything here is in units of 1/d ns
-- relative to B, below 2^53, so every number is an exact double: c*T is
-- c*num, now is nowv, Burst*T is bv.
--
-- A request is one HINCRBY of its epoch's field by c*num: admitted if the
-- TAT it moved was at or after now and the new one is within the burst; a
-- refusal is taken back (the script is atomic, so nobody sees it). A TAT
-- before now (a full bucket) is set to now + c*T instead. The epoch's first
-- write sets the key to expire at B + 2H, after any TAT an admission in the
-- epoch can reach, so the others need no PEXPIRE.

local TWO53 = 9007199254740992

-- bucket_group: what a group's requests share, from ARGV[i]: c*num (the
-- judged cost: 1 for a peek; past bv for a cost past the burst), d, bv, H
-- in ms, write ('0' for a peek or a cost past the burst); ns, nl: now in
-- seconds and nanoseconds; slack: ms added to the expiry.
local function bucket_group(ns, nl, i, slack)
  local den, hms = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 3])
  local nms = ns * 1000 + math.floor(nl / 1000000)
  local b = nms - math.fmod(nms, hms)
  local cv = tonumber(ARGV[i])
  local nowv = ((nms - b) * 1000000 + math.fmod(nl, 1000000)) * den
  return {cv = cv, cvs = ARGV[i], ncvs = '-' .. ARGV[i],
    den = den, dens = ARGV[i + 1], bv = tonumber(ARGV[i + 2]),
    write = ARGV[i + 4] ~= '0', b = b, hmss = ARGV[i + 3],
    f = string.format('%d:', b) .. ARGV[i + 1] .. ':' .. ARGV[i + 3],
    nowv = nowv, full = string.format('%d', nowv + cv),
    ttl = string.format('%d', b + 2 * hms - nms + slack)}
end

-- bucket_reply is the reply for a debt (TAT - now, in 1/d ns, 0 if the TAT
-- is before now) and the outcome: 2n+1 if admitted and 2n if not, for n the
-- debt in whole ns, or "n a f" (a 1 or 0) when it has a fraction f/d. (A
-- debt is below 2^53; one of 2^52 or more is always refused, and 2n is
-- exact.)
local function bucket_reply(debt, ok, g)
  local n = math.floor(debt / g.den)
  local f = debt - n * g.den
  if f < 0 then n, f = n - 1, f + g.den elseif f >= g.den then n, f = n + 1, f - g.den end
  if f == 0 then return ok and 2 * n + 1 or 2 * n end
  return string.format('%d %d %d', n, ok and 1 or 0, f)
end

-- bucket_rest finishes a request on a key whose field for this epoch was
-- absent (or held 0): the key has another epoch's field, or none. wrote
-- says whether the request's HINCRBY made the field (a peek, or a cost
-- past the burst, writes nothing). An earlier epoch's TAT is carried into
-- this one; anything else (a later epoch, another denominator, a number too
-- large, another H) is left to take.lua (-1), with the HINCRBY taken back.
local function bucket_rest(key, g, wrote)
  local v = redis.call('HGETALL', key)
  local other, ov, many
  for i = 1, #v, 2 do
    if v[i] ~= g.f then
      if other then many = true end
      other, ov = v[i], v[i + 1]
    end
  end
  local old = 0 -- the TAT, relative to B
  if other then
    local ob, od, oh = string.match(other, '^(%d+):(%d+):(%d+)$')
    ob = tonumber(ob)
    if many or not ob or od ~= g.dens or oh ~= g.hmss or ob >= g.b or #ov > 15
      or (g.b - ob) * 1000000 * g.den >= TWO53 then
      if wrote then redis.call('HDEL', key, g.f) end
      return -1
    end
    old = tonumber(ov) - (g.b - ob) * 1000000 * g.den
  end
  local debt = math.max(old - g.nowv, 0)
  local ok = debt + g.cv <= g.bv
  if not wrote then return bucket_reply(debt, ok, g) end
  if not ok then
    redis.call('HDEL', key, g.f)
    return bucket_reply(debt, false, g)
  end
  redis.call('HSET', key, g.f, string.format('%d', math.max(old, g.nowv) + g.cv))
  if other then redis.call('HDEL', key, other) end
  redis.call('PEXPIRE', key, g.ttl)
  return bucket_reply(debt, true, g)
end

-- bucket decides one request of group g on key. Returns bucket_reply's
-- value, or -1 when take.lua is to decide (nothing written).
local function bucket(key, g)
  if g.write then
    local r = redis.pcall('HINCRBY', key, g.f, g.cvs)
    if type(r) ~= 'number' then return -1 end -- not a number, or past int64
    if r >= TWO53 then
      redis.call('HINCRBY', key, g.f, g.ncvs)
      return -1
    end
    local old = r - g.cv
    if old > 0 then
      if old >= g.nowv then -- the TAT is at or after now
        if r - g.nowv <= g.bv then return bucket_reply(old - g.nowv, true, g) end
        redis.call('HINCRBY', key, g.f, g.ncvs) -- refused: taken back
        return bucket_reply(old - g.nowv, false, g)
      end
      -- A TAT before now, in this epoch: a full bucket.
      redis.call('HSET', key, g.f, g.full)
      return bucket_reply(0, true, g)
    end
    -- The field is new (or held 0). On a new key (no expiry yet; before
    -- Redis 7.0, which has no NX, a key with this field alone) it is the
    -- state.
    local x = redis.pcall('PEXPIRE', key, g.ttl, 'NX')
    if x ~= 1 and type(x) == 'table' and redis.call('HLEN', key) == 1 then
      redis.call('PEXPIRE', key, g.ttl)
      x = 1
    end
    if x == 1 then
      if g.nowv > 0 then redis.call('HSET', key, g.f, g.full) end
      return bucket_reply(0, true, g)
    end
    return bucket_rest(key, g, true)
  end
  -- A peek, or a cost past the burst: read only.
  local v = redis.call('HGET', key, g.f)
  if not v then return bucket_rest(key, g, false) end
  if #v > 15 then return -1 end
  local debt = math.max(tonumber(v) - g.nowv, 0)
  return bucket_reply(debt, debt + g.cv <= g.bv, g)
end
