-- take.lua's fixed window (kind "f"): admitted iff the count of the
-- window (aligned to multiples of the period since the epoch, or the
-- calendar window Go computed: calwin) plus the
-- cost is at most the limit. The state is the window start t and count c:
-- in the hash, one field per window named "t:end", whose value is c (as
-- fixed.lua keeps it); the latest window's is the state, earlier ones are
-- over (deleted at the next write).

-- calwin returns request r's calendar window, computed in Go (start, end,
-- previous start, next end: ARGV fields 5-8 of the request), and marks r
-- for a retry unless the window holds th, tl.
local function calwin(r, th, tl)
  local sh, sl = P(ARGV[r.a + 5])
  local eh, el = P(ARGV[r.a + 6])
  if cmp(th, tl, sh, sl) < 0 or cmp(th, tl, eh, el) >= 0 then r.retry = true end
  local qh, ql = P(ARGV[r.a + 7])
  local xh, xl = P(ARGV[r.a + 8])
  return sh, sl, eh, el, qh, ql, xh, xl
end

local function fixed_load(key)
  local s = {key = key, th = 0, tl = 0, old = {}}
  local v = redis.call('HGETALL', key)
  local c
  for i = 1, #v, 2 do
    local t = string.match(v[i], '^(%d+):%d+$')
    if t then
      local th, tl = P(t)
      if not s.f or cmp(th, tl, s.th, s.tl) > 0 then
        if s.f then s.old[#s.old + 1] = s.f end
        s.f, s.th, s.tl, c = v[i], th, tl, v[i + 1]
      else
        s.old[#s.old + 1] = v[i]
      end
    end
  end
  s.ch, s.cl = P(c or "0")
  return s
end

-- take decides r on s: admitted, and the state it saw (t, c).
local function fixed_take(s, r)
  local seen1, seen2 = S(s.th, s.tl), S(s.ch, s.cl)
  -- The window: the latest of now and the stored one (a clock that
  -- stepped back stays in the stored window).
  local th, tl = maxp(r.nh, r.nl, s.th, s.tl)
  local sh, sl, eh, el
  if r.cal then
    sh, sl, eh, el = calwin(r, th, tl)
  else
    sh, sl = sub(th, tl, mod(th, tl, r.ph, r.pl))
    eh, el = add(sh, sl, r.ph, r.pl)
  end
  local cnth, cntl = 0, 0 -- the window's count
  if cmp(s.th, s.tl, sh, sl) == 0 then cnth, cntl = s.ch, s.cl end
  local uh, ul = add(cnth, cntl, r.jh, r.jl)
  if cmp(r.ch, r.cl, r.kh, r.kl) > 0 or cmp(uh, ul, r.kh, r.kl) > 0 then
    return false, seen1, seen2
  end
  if r.costpos then
    s.th, s.tl, s.ch, s.cl = sh, sl, uh, ul
    s.xh, s.xl = eh, el
    s.dirty = true
  end
  return true, seen1, seen2
end

local function fixed_save(s, x)
  local f = S(s.th, s.tl) .. ':' .. x
  if s.f and s.f ~= f then s.old[#s.old + 1] = s.f end
  if #s.old > 0 then redis.call('HDEL', s.key, unpack(s.old)) end
  redis.call('HSET', s.key, f, S(s.ch, s.cl))
end
