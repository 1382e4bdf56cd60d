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
-- 63-bit nanoseconds and 126-bit products. Every number here is a
-- non-negative integer v held as a pair (h, l) of exact doubles with
-- v = h*10^9 + l and 0 <= l < 10^9 (for an instant: seconds and
-- nanoseconds), read from and written as decimal strings. Sums and
-- comparisons of pairs are exact. The two operations that can leave that
-- range, a product (sliding window) and a remainder (window start), take a
-- fast path when doubles are provably exact and otherwise fall back to
-- arbitrary precision on 24-bit limbs. (One request of a fixed-window or
-- bucket-kind policy inside the exact range runs fixed.lua or bucket.lua
-- instead, which work in plain doubles.)
--
-- KEYS: two per request: the state hash, and the sliding-log list.
-- ARGV[1]: now in nanoseconds, or "" to read Redis TIME.
-- ARGV[2]: milliseconds added to every TTL (0 when the time is Redis TIME).
-- ARGV[3]: the number of requests; then 9 fields per request:
--   kind ("b" bucket, "f" fixed window, "w" sliding window, "l" sliding log),
--   cost ("!" before it: a charge, see charge below), capacity (burst or
--   limit), period, dur(cost) ns, dur(cost) frac, dur(burst) ns, dur(burst)
--   frac, denominator.
-- Returns {now, committed ("1"/"0"), then 4 strings per request}.

local G = 1000000000

-- Now, as a pair (seconds, nanoseconds) and as the decimal string returned.
local nh, nl, nows
if ARGV[1] == "" then
  local t = redis.call('TIME')
  nh, nl = tonumber(t[1]), tonumber(t[2]) * 1000
else
  nows = ARGV[1]
  local m = #nows
  if m <= 9 then
    nh, nl = 0, tonumber(nows)
  else
    nh, nl = tonumber(string.sub(nows, 1, m - 9)), tonumber(string.sub(nows, m - 8))
  end
end
if nh == 0 then nows = string.format("%d", nl) else nows = string.format("%d%09d", nh, nl) end
local slack = tonumber(ARGV[2])
local n = tonumber(ARGV[3])

-- Arbitrary precision, for the slow paths: little-endian 24-bit limbs.
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

local function bcmp(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
  end
  return 0
end

local function badd(a, b)
  local r, carry = {}, 0
  for i = 1, math.max(#a, #b) do
    local v = (a[i] or 0) + (b[i] or 0) + carry
    if v >= BASE then r[i] = v - BASE; carry = 1 else r[i] = v; carry = 0 end
  end
  if carry > 0 then r[#r + 1] = carry end
  return r
end

-- sub returns a - b for a >= b.
local function bsub(a, b)
  local r, borrow = {}, 0
  for i = 1, #a do
    local v = a[i] - (b[i] or 0) - borrow
    if v < 0 then r[i] = v + BASE; borrow = 1 else r[i] = v; borrow = 0 end
  end
  return norm(r)
end

local function bmul(a, b)
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

-- bdivmod returns the quotient and remainder of a / p for p > 0, by binary
-- long division.
local function bdivmod(a, p)
  local q, r = {}, {}
  for i = #a, 1, -1 do
    local limb, qd = a[i], 0
    for bit = 23, 0, -1 do
      r = badd(r, r)
      local pow = 2 ^ bit
      if limb >= pow then
        limb = limb - pow
        r = badd(r, {1})
      end
      if bcmp(r, p) >= 0 then
        r = bsub(r, p)
        qd = qd + pow
      end
    end
    q[i] = qd
  end
  return norm(q), r
end

-- mod returns a mod p for p > 0, by binary long division.
local function bmod(a, p)
  if bcmp(a, p) < 0 then return a end
  local r = {}
  for i = #a, 1, -1 do
    local limb = a[i]
    for bit = 23, 0, -1 do
      r = badd(r, r)
      local pow = 2 ^ bit
      if limb >= pow then
        limb = limb - pow
        r = badd(r, {1})
      end
      if bcmp(r, p) >= 0 then r = bsub(r, p) end
    end
  end
  return r
end


local EXACT = 9007199254740992 -- 2^53

-- P parses a decimal string into a pair.
local function P(s)
  local n = #s
  if n <= 9 then return 0, tonumber(s) end
  return tonumber(string.sub(s, 1, n - 9)), tonumber(string.sub(s, n - 8))
end

-- S formats a pair as a decimal string.
local function S(h, l)
  if h == 0 then return string.format("%d", l) end
  return string.format("%d%09d", h, l)
end

local function add(ah, al, bh, bl)
  local l = al + bl
  if l >= G then return ah + bh + 1, l - G end
  return ah + bh, l
end

-- sub returns a - b for a >= b.
local function sub(ah, al, bh, bl)
  local l = al - bl
  if l < 0 then return ah - bh - 1, l + G end
  return ah - bh, l
end

local function cmp(ah, al, bh, bl)
  if ah ~= bh then return ah < bh and -1 or 1 end
  if al ~= bl then return al < bl and -1 or 1 end
  return 0
end

local function maxp(ah, al, bh, bl)
  if cmp(ah, al, bh, bl) >= 0 then return ah, al end
  return bh, bl
end

local function pbig(h, l) return big(S(h, l)) end

-- mulcmp compares a*b with c*d.
local function mulcmp(ah, al, bh, bl, ch, cl, dh, dl)
  local a, b, c, d = ah * G + al, bh * G + bl, ch * G + cl, dh * G + dl
  if a < EXACT and b < EXACT and c < EXACT and d < EXACT then
    local x, y = a * b, c * d
    if x < EXACT and y < EXACT then
      if x < y then return -1 elseif x > y then return 1 end
      return 0
    end
  end
  return bcmp(bmul(pbig(ah, al), pbig(bh, bl)), bmul(pbig(ch, cl), pbig(dh, dl)))
end

-- mod returns a mod p, for p > 0.
local function mod(ah, al, ph, pl)
  if cmp(ah, al, ph, pl) < 0 then return ah, al end
  if pl == 0 then return ah % ph, al end -- whole seconds
  if ph == 0 and G % pl == 0 then return 0, al % pl end -- divides a second
  local a, p = ah * G + al, ph * G + pl
  if a < EXACT / 2 then -- then every intermediate of a % p is exact
    local r = a % p
    if r >= 0 and r < p then return math.floor(r / G), r % G end
  end
  return P(str(bmod(pbig(ah, al), pbig(ph, pl))))
end

-- Instants with a fraction, ns + frac/den, as two pairs.
local function radd(ah, al, afh, afl, bh, bl, bfh, bfl, dh, dl)
  local nh, nl = add(ah, al, bh, bl)
  local fh, fl = add(afh, afl, bfh, bfl)
  if cmp(fh, fl, dh, dl) >= 0 then
    fh, fl = sub(fh, fl, dh, dl)
    nh, nl = add(nh, nl, 0, 1)
  end
  return nh, nl, fh, fl
end

local function rless(ah, al, afh, afl, bh, bl, bfh, bfl)
  local c = cmp(ah, al, bh, bl)
  return c < 0 or (c == 0 and cmp(afh, afl, bfh, bfl) < 0)
end

local states, order = {}, {}
local out = {nows, "0"}
local all = true

-- entry parses a sliding-log entry "at cost".
local function entry(e)
  local sp = string.find(e, " ", 1, true)
  local ah, al = P(string.sub(e, 1, sp - 1))
  local ch, cl = P(string.sub(e, sp + 1))
  return ah, al, ch, cl
end

-- logentry returns the i-th (0-based) entry of a sliding-log state,
-- counting the stored list and then the pending appends.
local function logentry(s, i)
  if i < s.len then
    return entry(redis.call('LINDEX', s.lkey, i))
  end
  local p = s.pending[i - s.len + 1]
  return p[1], p[2], p[3], p[4]
end

local function load(kind, key, lkey, den)
  local s = {kind = kind, key = key, lkey = lkey}
  if kind == "b" then
    local v = redis.call('HMGET', key, 't', 'f', 'd')
    s.th, s.tl = P(v[1] or "0")
    s.fh, s.fl = P(v[2] or "0")
    if v[3] and v[3] ~= den and (s.fh > 0 or s.fl > 0) then
      -- Stored by a policy of the same name with another emission
      -- interval: move the fraction up to the new grid, never earlier.
      local d = big(den)
      local q, r = bdivmod(bmul(pbig(s.fh, s.fl), d), big(v[3]))
      if #r > 0 then q = badd(q, {1}) end
      if bcmp(q, d) == 0 then
        s.th, s.tl = add(s.th, s.tl, 0, 1)
        s.fh, s.fl = 0, 0
      else
        s.fh, s.fl = P(str(q))
      end
    end
    s.d = den
  elseif kind == "f" or kind == "w" then
    local v = redis.call('HMGET', key, 't', 'c', 'p')
    s.th, s.tl = P(v[1] or "0")
    s.ch, s.cl = P(v[2] or "0")
    s.ph, s.pl = P(v[3] or "0")
  else
    local v = redis.call('HMGET', key, 'u', 'a')
    s.uh, s.ul = P(v[1] or "0")
    s.ah, s.al = P(v[2] or "0")
    s.len = redis.call('LLEN', lkey)
    s.trim = 0
    s.pending = {}
    if s.len == 0 then s.uh, s.ul = 0, 0 end
  end
  return s
end

-- walk returns the oldest entries of a log, from index j, whose costs add
-- up to need, as (the last one's instant, their sum) strings.
local function walk(s, j, needh, needl)
  local acch, accl = 0, 0
  while true do
    local ah, al, eh, el = logentry(s, j)
    acch, accl = add(acch, accl, eh, el)
    if cmp(acch, accl, needh, needl) >= 0 then return S(ah, al), S(acch, accl) end
    j = j + 1
  end
end

-- charge records a forced request (its cost prefixed "!" by Go): cost c
-- past the limit, as model.Model.Charge does, with its caps (a bucket's TAT
-- at most MaxTime + MaxBurstDuration; a window's count, a log's live sum at
-- most MaxInt64). Go sends a bucket's ChargeSpan as dur(cost). Returns the
-- four state strings of the request as take reports them; for a log, the
-- oldest entries (the new one included) whose leaving lets one unit in.
local TATH, TATL = 5764607523, 34234880 -- 2^62 + 2^60 ns
local MXH, MXL = 9223372036, 854775807  -- 2^63 - 1
local function charge(s, kind, ch, cl, kh, kl, ph, pl, a)
  if kind == "b" then
    local o1, o2 = S(s.th, s.tl), S(s.fh, s.fl)
    local th, tl, fh, fl = s.th, s.tl, s.fh, s.fl
    if rless(th, tl, fh, fl, nh, nl, 0, 0) then th, tl, fh, fl = nh, nl, 0, 0 end
    local dh, dl = P(ARGV[a + 9])
    local sh1, sl1 = P(ARGV[a + 5])
    local sh2, sl2 = P(ARGV[a + 6])
    local xh, xl, xfh, xfl = radd(th, tl, fh, fl, sh1, sl1, sh2, sl2, dh, dl)
    if rless(TATH, TATL, 0, 0, xh, xl, xfh, xfl) then xh, xl, xfh, xfl = TATH, TATL, 0, 0 end
    s.th, s.tl, s.fh, s.fl, s.d = xh, xl, xfh, xfl, ARGV[a + 9]
    if xfh > 0 or xfl > 0 then xh, xl = add(xh, xl, 0, 1) end
    s.xh, s.xl, s.dirty = xh, xl, true
    return o1, o2, "", ""
  end
  local o1, o2, o3, o4 = "", "", "", ""
  if kind == "f" or kind == "w" then
    o1, o2 = S(s.th, s.tl), S(s.ch, s.cl)
    if kind == "w" then o3 = S(s.ph, s.pl) end
    local th, tl = maxp(nh, nl, s.th, s.tl)
    local sh, sl = sub(th, tl, mod(th, tl, ph, pl))
    local curh, curl, prh, prl = 0, 0, 0, 0
    if cmp(s.th, s.tl, sh, sl) == 0 then
      curh, curl, prh, prl = s.ch, s.cl, s.ph, s.pl
    elseif kind == "w" and cmp(sh, sl, ph, pl) >= 0 then
      local qh, ql = sub(sh, sl, ph, pl)
      if cmp(s.th, s.tl, qh, ql) == 0 then prh, prl = s.ch, s.cl end
    end
    local uh, ul = add(curh, curl, ch, cl)
    if cmp(uh, ul, MXH, MXL) > 0 then uh, ul = MXH, MXL end
    s.th, s.tl, s.ch, s.cl = sh, sl, uh, ul
    s.xh, s.xl = add(sh, sl, ph, pl)
    if kind == "w" then
      s.ph, s.pl = prh, prl
      s.xh, s.xl = add(s.xh, s.xl, ph, pl)
    end
    s.dirty = true
    return o1, o2, o3, o4
  end
  -- Sliding log: drop (tentatively) the entries that have left, append.
  while s.trim < s.len + #s.pending do
    local ah, al, eh, el = logentry(s, s.trim)
    local lh, ll = add(ah, al, ph, pl)
    if cmp(lh, ll, nh, nl) > 0 then break end
    s.trim = s.trim + 1
    s.uh, s.ul = sub(s.uh, s.ul, eh, el)
  end
  o1, o2 = S(s.uh, s.ul), S(s.ah, s.al)
  local pre = {trim = s.trim, uh = s.uh, ul = s.ul} -- for redo
  local uh, ul = add(s.uh, s.ul, ch, cl)
  if cmp(uh, ul, MXH, MXL) > 0 then uh, ul = MXH, MXL end
  local ah, al = nh, nl
  if s.uh > 0 or s.ul > 0 then ah, al = maxp(ah, al, s.ah, s.al) end
  local eh, el = sub(uh, ul, s.uh, s.ul)
  s.pending[#s.pending + 1] = {ah, al, eh, el}
  s.uh, s.ul, s.ah, s.al = uh, ul, ah, al
  s.xh, s.xl = add(ah, al, ph, pl)
  s.dirty = true
  if cmp(uh, ul, kh, kl) >= 0 then
    -- In debt or full: one unit fits once entries holding used + 1 - limit
    -- have left; report the last of them.
    local needh, needl = sub(uh, ul, kh, kl)
    o3, o4 = walk(s, s.trim, add(needh, needl, 0, 1))
  end
  return o1, o2, o3, o4, pre
end

-- A sliding-log charge that is the first request of its key reports the
-- oldest entries for the state after it; when the batch is refused, Go
-- decides a peek on the state before it instead: redo holds what
-- rewrites those two fields then.
local redo = {}

for i = 1, n do
  local base = 3 + (i - 1) * 9
  local kind = ARGV[base + 1]
  local costs, force = ARGV[base + 2], false
  if string.sub(costs, 1, 1) == "!" then costs, force = string.sub(costs, 2), true end
  local ch, cl = P(costs)            -- cost
  local kh, kl = P(ARGV[base + 3])   -- capacity
  local ph, pl = P(ARGV[base + 4])   -- period
  local costpos = ch > 0 or cl > 0
  -- A peek (cost 0) is admitted iff cost 1 would be: jh, jl is the cost
  -- judged. (For the bucket kinds Go sends dur(1) with a peek.)
  local jh, jl = ch, cl
  if not costpos then jh, jl = 0, 1 end
  local key, lkey = KEYS[2 * i - 1], KEYS[2 * i]
  local s = states[key]
  local first = not s
  if not s then
    s = load(kind, key, lkey, ARGV[base + 9])
    states[key] = s
    order[#order + 1] = key
  end
  local ok = false
  local o1, o2, o3, o4 = "", "", "", ""
  if force and costpos then
    local pre
    o1, o2, o3, o4, pre = charge(s, kind, ch, cl, kh, kl, ph, pl, base)
    if pre and first then
      pre.s, pre.kh, pre.kl, pre.pos = s, kh, kl, #out + 3
      redo[#redo + 1] = pre
    end
  elseif kind == "b" then
    local dh, dl = P(ARGV[base + 9])
    o1, o2 = S(s.th, s.tl), S(s.fh, s.fl)
    if cmp(ch, cl, kh, kl) <= 0 then
      local th, tl, fh, fl = s.th, s.tl, s.fh, s.fl
      if rless(th, tl, fh, fl, nh, nl, 0, 0) then th, tl, fh, fl = nh, nl, 0, 0 end
      local ch1, cl1 = P(ARGV[base + 5])
      local ch2, cl2 = P(ARGV[base + 6])
      local xh, xl, xfh, xfl = radd(th, tl, fh, fl, ch1, cl1, ch2, cl2, dh, dl)
      local bh1, bl1 = P(ARGV[base + 7])
      local bh2, bl2 = P(ARGV[base + 8])
      local lh, ll, lfh, lfl = radd(nh, nl, 0, 0, bh1, bl1, bh2, bl2, dh, dl)
      if not rless(lh, ll, lfh, lfl, xh, xl, xfh, xfl) then
        ok = true
        if costpos then
          s.th, s.tl, s.fh, s.fl, s.d = xh, xl, xfh, xfl, ARGV[base + 9]
          if xfh > 0 or xfl > 0 then xh, xl = add(xh, xl, 0, 1) end
          s.xh, s.xl = xh, xl
          s.dirty = true
        end
      end
    end
  elseif kind == "f" then
    o1, o2 = S(s.th, s.tl), S(s.ch, s.cl)
    local th, tl = maxp(nh, nl, s.th, s.tl)
    local sh, sl = sub(th, tl, mod(th, tl, ph, pl))
    local cnth, cntl = 0, 0
    if cmp(s.th, s.tl, sh, sl) == 0 then cnth, cntl = s.ch, s.cl end
    local uh, ul = add(cnth, cntl, jh, jl)
    if cmp(ch, cl, kh, kl) <= 0 and cmp(uh, ul, kh, kl) <= 0 then
      ok = true
      if costpos then
        s.th, s.tl, s.ch, s.cl = sh, sl, uh, ul
        s.xh, s.xl = add(sh, sl, ph, pl)
        s.dirty = true
      end
    end
  elseif kind == "w" then
    o1, o2, o3 = S(s.th, s.tl), S(s.ch, s.cl), S(s.ph, s.pl)
    local th, tl = maxp(nh, nl, s.th, s.tl)
    local sh, sl = sub(th, tl, mod(th, tl, ph, pl))
    local curh, curl, prh, prl = 0, 0, 0, 0
    if cmp(s.th, s.tl, sh, sl) == 0 then
      curh, curl, prh, prl = s.ch, s.cl, s.ph, s.pl
    elseif cmp(sh, sl, ph, pl) >= 0 then
      local qh, ql = sub(sh, sl, ph, pl)
      if cmp(s.th, s.tl, qh, ql) == 0 then prh, prl = s.ch, s.cl end
    end
    if cmp(ch, cl, kh, kl) <= 0 then
      local uh, ul = add(curh, curl, jh, jl)
      if cmp(uh, ul, kh, kl) <= 0 then
        -- (limit - cur - cost) * P >= prev * (P - e), e = t - start
        local rh, rl = sub(kh, kl, uh, ul)
        local eh, el = sub(th, tl, sh, sl)
        local wh, wl = sub(ph, pl, eh, el)
        ok = mulcmp(rh, rl, ph, pl, prh, prl, wh, wl) >= 0
      end
      if ok and costpos then
        s.th, s.tl, s.ch, s.cl, s.ph, s.pl = sh, sl, uh, ul, prh, prl
        local xh, xl = add(sh, sl, ph, pl)
        s.xh, s.xl = add(xh, xl, ph, pl)
        s.dirty = true
      end
    end
  else
    -- Drop (tentatively) the entries that have left: At + P <= now.
    while s.trim < s.len + #s.pending do
      local ah, al, eh, el = logentry(s, s.trim)
      local lh, ll = add(ah, al, ph, pl)
      if cmp(lh, ll, nh, nl) > 0 then break end
      s.trim = s.trim + 1
      s.uh, s.ul = sub(s.uh, s.ul, eh, el)
    end
    o1, o2 = S(s.uh, s.ul), S(s.ah, s.al)
    if cmp(ch, cl, kh, kl) <= 0 then
      local uh, ul = add(s.uh, s.ul, jh, jl)
      if cmp(uh, ul, kh, kl) <= 0 then
        ok = true
        if costpos then
          local ah, al = nh, nl
          if s.uh > 0 or s.ul > 0 then ah, al = maxp(ah, al, s.ah, s.al) end
          s.pending[#s.pending + 1] = {ah, al, ch, cl}
          s.uh, s.ul = uh, ul
          s.ah, s.al = ah, al
          s.xh, s.xl = add(ah, al, ph, pl)
          s.dirty = true
        end
      else
        -- The request fits once the oldest entries whose costs add up to
        -- used + cost - limit have left; report the last of them.
        local needh, needl = sub(uh, ul, kh, kl)
        local acch, accl = 0, 0
        local j = s.trim
        local ah, al, eh, el
        while true do
          ah, al, eh, el = logentry(s, j)
          acch, accl = add(acch, accl, eh, el)
          if cmp(acch, accl, needh, needl) >= 0 then break end
          j = j + 1
        end
        o3, o4 = S(ah, al), S(acch, accl)
      end
    end
  end
  if force then ok = true end -- a charge never refuses the batch
  if not ok then all = false end
  out[#out + 1] = o1
  out[#out + 1] = o2
  out[#out + 1] = o3
  out[#out + 1] = o4
end

if not all then
  for _, r in ipairs(redo) do
    local o3, o4 = "", ""
    if cmp(r.uh, r.ul, r.kh, r.kl) >= 0 then
      local needh, needl = sub(r.uh, r.ul, r.kh, r.kl)
      o3, o4 = walk(r.s, r.trim, add(needh, needl, 0, 1))
    end
    out[r.pos], out[r.pos + 1] = o3, o4
  end
end

if all then
  for _, key in ipairs(order) do
    local s = states[key]
    if s.dirty then
      -- ceil((x - now) / 1ms), at least 1, plus the slack
      local dh, dl = sub(s.xh, s.xl, nh, nl)
      local ms = dh * 1000 + math.ceil(dl / 1000000)
      if ms < 1 then ms = 1 end
      ms = string.format("%d", ms + slack)
      local x = S(s.xh, s.xl)
      if s.kind == "b" then
        redis.call('HSET', key, 't', S(s.th, s.tl), 'f', S(s.fh, s.fl), 'd', s.d, 'x', x)
      elseif s.kind == "f" then
        redis.call('HSET', key, 't', S(s.th, s.tl), 'c', S(s.ch, s.cl), 'x', x)
      elseif s.kind == "w" then
        redis.call('HSET', key, 't', S(s.th, s.tl), 'c', S(s.ch, s.cl), 'p', S(s.ph, s.pl), 'x', x)
      else
        if s.trim > 0 then redis.call('LTRIM', s.lkey, math.min(s.trim, s.len), -1) end
        for _, p in ipairs(s.pending) do
          redis.call('RPUSH', s.lkey, S(p[1], p[2]) .. " " .. S(p[3], p[4]))
        end
        redis.call('HSET', key, 'u', S(s.uh, s.ul), 'a', S(s.ah, s.al), 'x', x)
        redis.call('PEXPIRE', s.lkey, ms)
      end
      redis.call('PEXPIRE', key, ms)
    end
  end
  out[2] = "1"
end
return out
