-- take.lua's token-bucket, gcra and leaky-bucket (kind "b"). The state is
-- the theoretical arrival time TAT = t + f/d ns. With emission interval T
-- a request of cost c at now is admitted iff max(TAT, now) + c*T <=
-- now + Burst*T, and then TAT = max(TAT, now) + c*T. Go sends c*T and
-- Burst*T as whole ns and a fraction (dur(1) for a peek, judged as cost 1).

local function bucket_load(key, lkey, den)
  local s = {key = key, d = den}
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
  return s
end

-- take decides r on s: admitted, and the state it saw (t, f).
local function bucket_take(s, r)
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
    s.xh, s.xl = xh, xl -- the expiry: the TAT rounded up to a whole ns
    s.dirty = true
  end
  return true, seen1, seen2
end

-- (e is bucket.lua's record of the key's expiry, which this write moves.)
local function bucket_save(s, x)
  redis.call('HSET', s.key, 't', S(s.th, s.tl), 'f', S(s.fh, s.fl), 'd', s.d, 'x', x, 'e', '')
end
