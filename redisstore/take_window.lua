-- take.lua's sliding window (kind "w"): with e the time since the current
-- aligned window began, admitted iff prev*(P - e)/P + cur + cost <= limit,
-- decided as (limit - cur - cost)*P >= prev*(P - e), exactly. The state
-- is the window start t, its count c and the previous window's count p.

local function window_load(key)
  local s = {key = key}
  local v = redis.call('HMGET', key, 't', 'c', 'p')
  s.th, s.tl = P(v[1] or "0")
  s.ch, s.cl = P(v[2] or "0")
  s.ph, s.pl = P(v[3] or "0")
  return s
end

-- take decides r on s: admitted, and the state it saw (t, c, p).
local function window_take(s, r)
  local seen1, seen2, seen3 = S(s.th, s.tl), S(s.ch, s.cl), S(s.ph, s.pl)
  local ph, pl = r.ph, r.pl
  local th, tl = maxp(r.nh, r.nl, s.th, s.tl)
  local sh, sl, qh, ql, nxh, nxl
  if r.cal then
    -- The weight is the calendar window's own length: P = end - start.
    local eh, el
    sh, sl, eh, el, qh, ql, nxh, nxl = calwin(r, th, tl)
    ph, pl = sub(eh, el, sh, sl)
  else
    sh, sl = sub(th, tl, mod(th, tl, ph, pl))
  end
  local curh, curl, prh, prl = 0, 0, 0, 0
  if cmp(s.th, s.tl, sh, sl) == 0 then
    curh, curl, prh, prl = s.ch, s.cl, s.ph, s.pl
  elseif r.cal then
    if cmp(s.th, s.tl, qh, ql) == 0 then prh, prl = s.ch, s.cl end
  elseif cmp(sh, sl, ph, pl) >= 0 then
    local qh, ql = sub(sh, sl, ph, pl)
    if cmp(s.th, s.tl, qh, ql) == 0 then prh, prl = s.ch, s.cl end
  end
  if cmp(r.ch, r.cl, r.kh, r.kl) > 0 then return false, seen1, seen2, seen3 end
  local uh, ul = add(curh, curl, r.jh, r.jl)
  if cmp(uh, ul, r.kh, r.kl) > 0 then return false, seen1, seen2, seen3 end
  local rh, rl = sub(r.kh, r.kl, uh, ul)
  local eh, el = sub(th, tl, sh, sl)
  local wh, wl = sub(ph, pl, eh, el)
  if mulcmp(rh, rl, ph, pl, prh, prl, wh, wl) < 0 then return false, seen1, seen2, seen3 end
  if r.costpos then
    s.th, s.tl, s.ch, s.cl, s.ph, s.pl = sh, sl, uh, ul, prh, prl
    if r.cal then
      s.xh, s.xl = nxh, nxl -- the next window's end
    else
      local xh, xl = add(sh, sl, ph, pl)
      s.xh, s.xl = add(xh, xl, ph, pl)
    end
    s.dirty = true
  end
  return true, seen1, seen2, seen3
end

local function window_save(s, x)
  redis.call('HSET', s.key, 't', S(s.th, s.tl), 'c', S(s.ch, s.cl), 'p', S(s.ph, s.pl), 'x', x)
end
