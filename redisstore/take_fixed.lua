-- take.lua's fixed window (kind "f"): admitted iff the count of the
-- window (aligned to multiples of the period since the epoch) plus the
-- cost is at most the limit. The state is the window start t and count c.

local function fixed_load(key)
  local s = {key = key}
  local v = redis.call('HMGET', key, 't', 'c')
  s.th, s.tl = P(v[1] or "0")
  s.ch, s.cl = P(v[2] or "0")
  return s
end

-- take decides r on s: admitted, and the state it saw (t, c).
local function fixed_take(s, r)
  local seen1, seen2 = S(s.th, s.tl), S(s.ch, s.cl)
  -- The window: the latest of now and the stored one (a clock that
  -- stepped back stays in the stored window).
  local th, tl = maxp(r.nh, r.nl, s.th, s.tl)
  local sh, sl = sub(th, tl, mod(th, tl, r.ph, r.pl))
  local cnth, cntl = 0, 0 -- the window's count
  if cmp(s.th, s.tl, sh, sl) == 0 then cnth, cntl = s.ch, s.cl end
  local uh, ul = add(cnth, cntl, r.jh, r.jl)
  if cmp(r.ch, r.cl, r.kh, r.kl) > 0 or cmp(uh, ul, r.kh, r.kl) > 0 then
    return false, seen1, seen2
  end
  if r.costpos then
    s.th, s.tl, s.ch, s.cl = sh, sl, uh, ul
    s.xh, s.xl = add(sh, sl, r.ph, r.pl)
    s.dirty = true
  end
  return true, seen1, seen2
end

local function fixed_save(s, x)
  redis.call('HSET', s.key, 't', S(s.th, s.tl), 'c', S(s.ch, s.cl), 'x', x)
end
