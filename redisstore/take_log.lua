-- take.lua's sliding log (kind "l"): admitted iff the costs admitted in
-- (now - P, now] plus this cost are at most the limit. The state is a list
-- of entries "at cost" (oldest first) and a hash of their sum u and the
-- last entry's time a; an entry exactly P old has left.

-- entry parses a sliding-log entry "at cost".
local function entry(e)
  local sp = string.find(e, " ", 1, true)
  local ah, al = P(string.sub(e, 1, sp - 1))
  local ch, cl = P(string.sub(e, sp + 1))
  return ah, al, ch, cl
end

-- logentry returns the i-th (0-based) entry of s, counting the stored
-- list and then the entries this batch appends.
local function logentry(s, i)
  if i < s.len then return entry(redis.call('LINDEX', s.lkey, i)) end
  local p = s.pending[i - s.len + 1]
  return p[1], p[2], p[3], p[4]
end

local function slidinglog_load(key, lkey)
  local s = {key = key, lkey = lkey, trim = 0, pending = {}}
  local v = redis.call('HMGET', key, 'u', 'a')
  s.uh, s.ul = P(v[1] or "0")
  s.ah, s.al = P(v[2] or "0")
  s.len = redis.call('LLEN', lkey)
  if s.len == 0 then s.uh, s.ul = 0, 0 end
  return s
end

-- slidinglog_live returns where the entries inside r's window (at + P >
-- now) begin and their sum: s's entries from s.trim on, without those that
-- have left.
local function slidinglog_live(s, r)
  local trim, uh, ul = s.trim, s.uh, s.ul
  while trim < s.len + #s.pending do
    local ah, al, eh, el = logentry(s, trim)
    local lh, ll = add(ah, al, r.ph, r.pl)
    if cmp(lh, ll, r.nh, r.nl) > 0 then break end
    trim = trim + 1
    uh, ul = sub(uh, ul, eh, el)
  end
  return trim, uh, ul
end

-- take decides r on s: admitted, and the state it saw (u, a; and on a
-- refusal that can succeed later, the entry whose leaving makes room and
-- the sum of the entries up to it). Like the model, only an admission
-- drops the entries that have left r's window: a peek or a refusal leaves
-- them to a later request of the batch, whose policy (a longer period of
-- the same name) may still count them.
local function slidinglog_take(s, r)
  local trim, usedh, usedl = slidinglog_live(s, r)
  local seen1, seen2 = S(usedh, usedl), S(s.ah, s.al)
  if cmp(r.ch, r.cl, r.kh, r.kl) > 0 then return false, seen1, seen2 end
  local uh, ul = add(usedh, usedl, r.jh, r.jl)
  if cmp(uh, ul, r.kh, r.kl) > 0 then
    -- It fits once the oldest entries whose costs add up to used + cost -
    -- limit have left: report the last of them.
    local needh, needl = sub(uh, ul, r.kh, r.kl)
    local acch, accl, j = 0, 0, trim
    local ah, al, eh, el
    while true do
      ah, al, eh, el = logentry(s, j)
      acch, accl = add(acch, accl, eh, el)
      if cmp(acch, accl, needh, needl) >= 0 then break end
      j = j + 1
    end
    return false, seen1, seen2, S(ah, al), S(acch, accl)
  end
  if r.costpos then
    local ah, al = r.nh, r.nl
    if usedh > 0 or usedl > 0 then ah, al = maxp(ah, al, s.ah, s.al) end
    s.trim = trim
    s.pending[#s.pending + 1] = {ah, al, r.ch, r.cl}
    s.uh, s.ul, s.ah, s.al = uh, ul, ah, al
    s.xh, s.xl = add(ah, al, r.ph, r.pl)
    s.dirty = true
  end
  return true, seen1, seen2
end

local function slidinglog_save(s, x, ms)
  if s.trim > 0 then redis.call('LTRIM', s.lkey, math.min(s.trim, s.len), -1) end
  for _, p in ipairs(s.pending) do
    redis.call('RPUSH', s.lkey, S(p[1], p[2]) .. " " .. S(p[3], p[4]))
  end
  redis.call('HSET', s.key, 'u', S(s.uh, s.ul), 'a', S(s.ah, s.al), 'x', x)
  redis.call('PEXPIRE', s.lkey, ms)
end
