-- take.lua's token-bucket, gcra and leaky-bucket (kind "b"). The state is
-- the theoretical arrival time TAT = t + f/d ns. With emission interval T
-- a request of cost c at now is admitted iff max(TAT, now) + c*T <=
-- now + Burst*T, and then TAT = max(TAT, now) + c*T. Go sends c*T and
-- Burst*T as whole ns and a fraction (dur(1) for a peek, judged as cost 1).
--
-- In Redis the state is one field of the hash, named "B:d:H" (bucket.lua
-- keeps the same): B is the start of an epoch in ms since the Unix epoch, d
-- the denominator, H the epoch's length, and the value v = (TAT - B ms) *
-- d, so TAT = B ms + v/d ns (v >= 0). Epochs last H = floor(dur(Burst) /
-- 1ms) + 1 ms, aligned to multiples of H. A write goes to the field of
-- now's epoch and deletes the others; the key then expires at the later of
-- the TAT and B + 2H, so that bucket.lua's admissions in that epoch (a TAT
-- at most now + dur(Burst), below B + 2H) need no PEXPIRE. (H is in the
-- name so that a policy whose burst changes never trusts another H's
-- expiry.)

-- bucket_hms returns H in ms for dur(Burst) ns (a decimal string).
local function bucket_hms(bns)
  local h, l = P(bns)
  return h * 1000 + math.floor(l / 1000000) + 1
end

-- bucket_epoch returns the start (ms) of the epoch of the instant (h, l).
local function bucket_epoch(h, l, hms)
  local ms = h * 1000 + math.floor(l / 1000000)
  return ms - math.fmod(ms, hms)
end

-- bucket_ms returns the instant B ms as a pair.
local function bucket_ms(b)
  local h = math.floor(b / 1000)
  return h, (b - h * 1000) * 1000000
end

-- bucket_grid moves s's fraction to the grid of denominator den (a named
-- policy whose emission interval changed), rounded up: never earlier.
local function bucket_grid(s, den)
  if s.d ~= den and (s.fh > 0 or s.fl > 0) then
    local nd = big(den)
    local q, r = bdivmod(bmul(pbig(s.fh, s.fl), nd), big(s.d))
    if #r > 0 then q = badd(q, {1}) end
    if bcmp(q, nd) == 0 then
      s.th, s.tl = add(s.th, s.tl, 0, 1)
      s.fh, s.fl = 0, 0
    else
      s.fh, s.fl = P(str(q))
    end
  end
  s.d = den
end

local function bucket_load(key, lkey, den)
  local s = {key = key, d = den, old = {}, th = 0, tl = 0, fh = 0, fl = 0}
  local v = redis.call('HGETALL', key)
  local b, d, hms, val
  for i = 1, #v, 2 do
    local fb, fd, fh = string.match(v[i], '^(%d+):(%d+):(%d+)$')
    if fb then
      fb = tonumber(fb)
      if not b or fb > b then
        if s.f then s.old[#s.old + 1] = s.f end
        s.f, b, d, hms, val = v[i], fb, fd, tonumber(fh), v[i + 1]
      else
        s.old[#s.old + 1] = v[i]
      end
    end
  end
  if not s.f then return s end
  -- The stored denominator, epoch and its length (give.lua writes there).
  s.sd, s.B, s.hms = d, b, hms
  -- v / d: the quotient is ns after B, the remainder the fraction.
  local qh, ql
  local dn = tonumber(d)
  if #val <= 15 and dn < EXACT then
    local n = tonumber(val)
    local q = math.floor(n / dn)
    local r = n - q * dn
    if r < 0 then q, r = q - 1, r + dn elseif r >= dn then q, r = q + 1, r - dn end
    qh = math.floor(q / G)
    ql = q - qh * G
    s.fh = math.floor(r / G)
    s.fl = r - s.fh * G
  else
    local q, r = bdivmod(big(val), big(d))
    qh, ql = P(str(q))
    s.fh, s.fl = P(str(r))
  end
  local bh, bl = bucket_ms(b)
  s.th, s.tl = add(bh, bl, qh, ql)
  s.d = d
  bucket_grid(s, den)
  return s
end

-- bucket_expire records that s is written (its TAT, rounded up to a whole
-- ns, is xh, xl) in the epoch of now: the key expires at the later of the
-- TAT and that epoch's start plus 2H.
local function bucket_expire(s, r, xh, xl)
  local hms = bucket_hms(ARGV[r.a + 7])
  s.B, s.hms = bucket_epoch(r.nh, r.nl, hms), hms
  local eh, el = bucket_ms(s.B + 2 * hms)
  s.xh, s.xl = maxp(xh, xl, eh, el)
  s.dirty = true
end

-- take decides r on s: admitted, and the state it saw (t, f).
local function bucket_take(s, r)
  bucket_grid(s, ARGV[r.a + 9]) -- a batch may hold two rates of one name
  local seen1, seen2 = S(s.th, s.tl), S(s.fh, s.fl)
  if cmp(r.ch, r.cl, r.kh, r.kl) > 0 then return false, seen1, seen2 end
  local a = r.a
  local dh, dl = P(ARGV[a + 9])
  local th, tl, fh, fl = s.th, s.tl, s.fh, s.fl
  if rless(th, tl, fh, fl, r.nh, r.nl, 0, 0) then th, tl, fh, fl = r.nh, r.nl, 0, 0 end
  local ch1, cl1 = P(ARGV[a + 5])
  local ch2, cl2 = P(ARGV[a + 6])
  local xh, xl, xfh, xfl = radd(th, tl, fh, fl, ch1, cl1, ch2, cl2, dh, dl)
  local bh1, bl1 = P(ARGV[a + 7])
  local bh2, bl2 = P(ARGV[a + 8])
  local lh, ll, lfh, lfl = radd(r.nh, r.nl, 0, 0, bh1, bl1, bh2, bl2, dh, dl)
  if rless(lh, ll, lfh, lfl, xh, xl, xfh, xfl) then return false, seen1, seen2 end
  if r.costpos then
    s.th, s.tl, s.fh, s.fl, s.d = xh, xl, xfh, xfl, ARGV[a + 9]
    if xfh > 0 or xfl > 0 then xh, xl = add(xh, xl, 0, 1) end
    bucket_expire(s, r, xh, xl)
  end
  return true, seen1, seen2
end

-- bucket_save writes s in the field of its epoch B (v = (TAT - B ms) * d
-- + f) and deletes the others.
local function bucket_save(s, x)
  local bh, bl = bucket_ms(s.B)
  local xh, xl = sub(s.th, s.tl, bh, bl)
  local X, dn, f = xh * G + xl, tonumber(s.d), s.fh * G + s.fl
  local val
  if X < EXACT and dn < EXACT and f < EXACT and X * dn < EXACT - f then
    val = string.format('%d', X * dn + f)
  else
    val = str(badd(bmul(pbig(xh, xl), big(s.d)), pbig(s.fh, s.fl)))
  end
  local field = string.format('%d:%s:%d', s.B, s.d, s.hms)
  if s.f and s.f ~= field then s.old[#s.old + 1] = s.f end
  if #s.old > 0 then redis.call('HDEL', s.key, unpack(s.old)) end
  redis.call('HSET', s.key, field, val)
end
