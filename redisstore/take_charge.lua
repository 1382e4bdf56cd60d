-- take.lua's charge: a forced request (its cost prefixed "!" by Go)
-- records cost c past the limit, as model.Model.Charge does, with its caps
-- (a bucket's TAT at most model.MaxTime + sluice.MaxPeriod; a window's count, a
-- log's live sum at most MaxInt64). Go sends a bucket's ChargeSpan as
-- dur(cost). charge returns the four state strings of the request as take
-- reports them (for a log, the oldest entries, the new one included, whose
-- leaving lets one unit in).

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

local TATH, TATL = 5764607523, 34234880 -- 2^62 + 2^60 ns
local MXH, MXL = 9223372036, 854775807  -- 2^63 - 1

local function charge_bucket(s, r)
  bucket_grid(s, ARGV[r.a + 9])
  local o1, o2 = S(s.th, s.tl), S(s.fh, s.fl)
  local th, tl, fh, fl = s.th, s.tl, s.fh, s.fl
  if rless(th, tl, fh, fl, r.nh, r.nl, 0, 0) then th, tl, fh, fl = r.nh, r.nl, 0, 0 end
  local dh, dl = P(ARGV[r.a + 9])
  local sh1, sl1 = P(ARGV[r.a + 5])
  local sh2, sl2 = P(ARGV[r.a + 6])
  local xh, xl, xfh, xfl = radd(th, tl, fh, fl, sh1, sl1, sh2, sl2, dh, dl)
  if rless(TATH, TATL, 0, 0, xh, xl, xfh, xfl) then xh, xl, xfh, xfl = TATH, TATL, 0, 0 end
  s.th, s.tl, s.fh, s.fl, s.d = xh, xl, xfh, xfl, ARGV[r.a + 9]
  if xfh > 0 or xfl > 0 then xh, xl = add(xh, xl, 0, 1) end
  bucket_expire(s, r, xh, xl)
  return o1, o2, "", ""
end

-- charge_window charges a fixed ("f") or sliding ("w") window, aligned or
-- of a calendar (calwin).
local function charge_window(s, kind, r)
  local o1, o2, o3 = S(s.th, s.tl), S(s.ch, s.cl), ""
  if kind == "w" then o3 = S(s.ph, s.pl) end
  local ph, pl = r.ph, r.pl
  local th, tl = maxp(r.nh, r.nl, s.th, s.tl)
  local sh, sl, eh, el, qh, ql, nxh, nxl
  if r.cal then
    sh, sl, eh, el, qh, ql, nxh, nxl = calwin(r, th, tl)
  else
    sh, sl = sub(th, tl, mod(th, tl, ph, pl))
    eh, el = add(sh, sl, ph, pl)
    if cmp(sh, sl, ph, pl) >= 0 then qh, ql = sub(sh, sl, ph, pl) end
    nxh, nxl = add(eh, el, ph, pl)
  end
  local curh, curl, prh, prl = 0, 0, 0, 0
  if cmp(s.th, s.tl, sh, sl) == 0 then
    curh, curl, prh, prl = s.ch, s.cl, s.ph or 0, s.pl or 0
  elseif kind == "w" and qh and cmp(s.th, s.tl, qh, ql) == 0 then
    prh, prl = s.ch, s.cl
  end
  local uh, ul = add(curh, curl, r.ch, r.cl)
  if cmp(uh, ul, MXH, MXL) > 0 then uh, ul = MXH, MXL end
  s.th, s.tl, s.ch, s.cl = sh, sl, uh, ul
  s.xh, s.xl = eh, el
  if kind == "w" then s.ph, s.pl, s.xh, s.xl = prh, prl, nxh, nxl end
  s.dirty = true
  return o1, o2, o3, ""
end

local function charge_log(s, r)
  -- Drop the entries that have left (a charge always records), then append.
  s.trim, s.uh, s.ul = slidinglog_live(s, r)
  local o1, o2, o3, o4 = S(s.uh, s.ul), S(s.ah, s.al), "", ""
  local uh, ul = add(s.uh, s.ul, r.ch, r.cl)
  if cmp(uh, ul, MXH, MXL) > 0 then uh, ul = MXH, MXL end
  local ah, al = r.nh, r.nl
  if s.uh > 0 or s.ul > 0 then ah, al = maxp(ah, al, s.ah, s.al) end
  local eh, el = sub(uh, ul, s.uh, s.ul)
  s.pending[#s.pending + 1] = {ah, al, eh, el}
  s.uh, s.ul, s.ah, s.al = uh, ul, ah, al
  s.xh, s.xl = add(ah, al, r.ph, r.pl)
  s.dirty = true
  if cmp(uh, ul, r.kh, r.kl) >= 0 then
    -- In debt or full: one unit fits once entries holding used + 1 - limit
    -- have left; report the last of them.
    local needh, needl = sub(uh, ul, r.kh, r.kl)
    o3, o4 = walk(s, s.trim, add(needh, needl, 0, 1))
  end
  return o1, o2, o3, o4
end

local function charge(s, kind, r)
  if kind == "b" then return charge_bucket(s, r)
  elseif kind == "f" or kind == "w" then return charge_window(s, kind, r) end
  return charge_log(s, r)
end
